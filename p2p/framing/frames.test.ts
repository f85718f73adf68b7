import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { FrameStream, sendErrorFrame } from './frame-stream.ts';
import { FrameDecoder, decodeJsonFrame, encodeFrame, encodeJsonFrame } from './frames.ts';
import { memoryStream } from './memory-stream.ts';

const text = (bytes: Uint8Array | undefined) => new TextDecoder().decode(bytes);

describe('FrameDecoder', () => {
  it('cuts frames out of bytes that arrive split at arbitrary points', () => {
    const bytes = new Uint8Array([...encodeFrame(new TextEncoder().encode('hello')), ...encodeFrame(new Uint8Array()), ...encodeFrame(new TextEncoder().encode('world'))]);
    const decoder = new FrameDecoder(100);
    const frames: string[] = [];
    for (let i = 0; i < bytes.length; i += 3) {
      decoder.push(bytes.subarray(i, i + 3));
      for (let frame = decoder.next(); frame; frame = decoder.next()) frames.push(text(frame));
    }
    expect(frames).toEqual(['hello', '', 'world']);
    expect(decoder.pendingBytes).toBe(0);
  });

  it('rejects a frame whose header announces more than the limit, before its body arrives', () => {
    const decoder = new FrameDecoder(8);
    decoder.push(encodeFrame(new Uint8Array(9)).subarray(0, 4));
    expect(() => decoder.next()).toThrow(expect.objectContaining({ name: 'FrameTooLargeError' }));
  });
});

describe('decodeJsonFrame', () => {
  const Schema = z.object({ a: z.number() });
  it.each([
    ['not JSON', new TextEncoder().encode('{nope')],
    ['invalid UTF-8', new Uint8Array([0xff, 0xfe])],
    ['the wrong shape', new TextEncoder().encode('{"a":"x"}')],
  ])('rejects %s with InvalidFrameError', (_case, bytes) => {
    expect(() => decodeJsonFrame(bytes, Schema)).toThrow(expect.objectContaining({ name: 'InvalidFrameError' }));
  });
});

describe('FrameStream', () => {
  it('reads JSON frames and reports a clean end', async () => {
    const stream = memoryStream();
    const frames = new FrameStream(stream, { maxFrameBytes: 1024, readTimeoutMs: 5_000 });
    const frame = encodeJsonFrame({ a: 1 });
    stream.deliver(frame.subarray(0, 2));
    stream.deliver(frame.subarray(2));
    stream.end();
    expect(await frames.readJson(z.object({ a: z.number() }))).toEqual({ a: 1 });
    expect(await frames.read()).toBeUndefined();
  });

  it('aborts the stream when the remote goes silent past the read deadline', async () => {
    const stream = memoryStream();
    const frames = new FrameStream(stream, { maxFrameBytes: 1024, readTimeoutMs: 30 });
    await expect(frames.read()).rejects.toMatchObject({ name: 'ReadTimeoutError' });
    expect(stream.abortedWith?.name).toBe('ReadTimeoutError');
  });

  it('aborts the stream when the caller cancels', async () => {
    const stream = memoryStream();
    const frames = new FrameStream(stream, { maxFrameBytes: 1024, readTimeoutMs: 5_000 });
    const controller = new AbortController();
    const reading = frames.read(controller.signal);
    controller.abort();
    await expect(reading).rejects.toMatchObject({ name: 'StreamAbortedError' });
    expect(stream.abortedWith).toBeDefined();
  });

  it('treats an end inside a frame as an error', async () => {
    const stream = memoryStream();
    const frames = new FrameStream(stream, { maxFrameBytes: 1024, readTimeoutMs: 5_000 });
    stream.deliver(encodeJsonFrame({ a: 1 }).subarray(0, 6));
    stream.end();
    await expect(frames.read()).rejects.toMatchObject({ name: 'UnexpectedEndOfStreamError' });
  });

  it('rejects an oversized frame instead of buffering it, and can answer with an error frame', async () => {
    const stream = memoryStream();
    const frames = new FrameStream(stream, { maxFrameBytes: 16, readTimeoutMs: 5_000 });
    stream.deliver(encodeFrame(new Uint8Array(17)));
    const error = await frames.read().catch((err: Error) => err);
    expect(error).toMatchObject({ name: 'FrameTooLargeError' });
    await sendErrorFrame(frames, error);
    const decoder = new FrameDecoder(1024);
    for (const chunk of stream.sent) decoder.push(chunk);
    expect(JSON.parse(text(decoder.next()))).toMatchObject({ t: 'error', name: 'FrameTooLargeError' });
    expect(stream.closed).toBe(true);
  });

  it('writes a length-prefixed frame', async () => {
    const stream = memoryStream();
    const frames = new FrameStream(stream, { maxFrameBytes: 1024, readTimeoutMs: 5_000 });
    await frames.writeJson({ b: 2 });
    const decoder = new FrameDecoder(1024);
    for (const chunk of stream.sent) decoder.push(chunk);
    expect(JSON.parse(text(decoder.next()))).toEqual({ b: 2 });
  });
});
