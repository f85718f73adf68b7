/**
 * Frames over a libp2p stream, every read bounded: each read has a deadline (AbortSignal) and each frame a
 * maximum size. Timeouts and cancellation abort the stream before the error is rethrown; protocol errors
 * leave the caller the chance to send an error frame first (see `sendErrorFrame`).
 */
import type { AbortOptions } from '@libp2p/interface';
import type { z } from 'zod';
import { FrameDecoder, decodeJsonFrame, encodeFrameHeader } from './frames.ts';
import { ReadTimeoutError, StreamAbortedError, UnexpectedEndOfStreamError } from './errors.ts';

/** A list of byte chunks (libp2p hands these out; typed structurally because two uint8arraylist majors coexist). */
export interface ByteList {
  subarray(): Uint8Array;
}

/** The part of a libp2p `Stream` that framing needs (an in-memory pair implements it in tests). */
export interface ByteStream extends AsyncIterable<Uint8Array | ByteList> {
  send(data: Uint8Array): boolean;
  onDrain(options?: AbortOptions): Promise<void>;
  abort(err: Error): void;
  close(options?: AbortOptions): Promise<void>;
}

export interface FrameStreamOptions {
  maxFrameBytes: number;
  /** Deadline for each single read, on top of any caller signal. */
  readTimeoutMs: number;
}

/** Turn an abort reason into one of our named errors. */
export function abortReasonToError(reason: unknown): Error {
  if (reason instanceof Error && reason.name === 'TimeoutError') return new ReadTimeoutError('no data before the deadline');
  if (reason instanceof Error && reason.name !== 'AbortError') return reason;
  return new StreamAbortedError('the exchange was cancelled');
}

export class FrameStream {
  private readonly iterator: AsyncIterator<Uint8Array | ByteList>;
  private readonly decoder: FrameDecoder;
  private ended = false;

  constructor(
    readonly stream: ByteStream,
    private readonly options: FrameStreamOptions,
  ) {
    this.iterator = stream[Symbol.asyncIterator]();
    this.decoder = new FrameDecoder(options.maxFrameBytes);
  }

  /**
   * The next frame, or undefined when the remote closed its side cleanly between frames.
   * A timeout, a cancellation or a transport error aborts the stream. A protocol error (oversized frame,
   * truncated frame, invalid JSON) is only thrown: the caller answers with an error frame, then aborts.
   */
  async read(signal?: AbortSignal): Promise<Uint8Array | undefined> {
    const deadline = AbortSignal.timeout(this.options.readTimeoutMs);
    const combined = signal ? AbortSignal.any([signal, deadline]) : deadline;
    while (true) {
      const frame = this.decoder.next();
      if (frame) return frame;
      if (this.ended) {
        if (this.decoder.pendingBytes > 0) throw new UnexpectedEndOfStreamError('stream ended inside a frame');
        return undefined;
      }
      let result: IteratorResult<Uint8Array | ByteList>;
      try {
        result = await raceAbort(this.iterator.next(), combined);
      } catch (err) {
        const error = err instanceof Error ? err : new StreamAbortedError(String(err));
        this.stream.abort(error);
        throw error;
      }
      if (result.done) this.ended = true;
      else this.decoder.push(result.value instanceof Uint8Array ? result.value : result.value.subarray());
    }
  }

  /** The next frame as validated JSON; the end of the stream here is an error. */
  async readJson<T>(schema: z.ZodType<T>, signal?: AbortSignal): Promise<T> {
    const frame = await this.read(signal);
    if (!frame) throw new UnexpectedEndOfStreamError('stream ended before the expected frame');
    return decodeJsonFrame(frame, schema);
  }

  /** Header and payload go out as two sends, so that a large payload is never copied. */
  async write(payload: Uint8Array, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    this.stream.send(encodeFrameHeader(payload.byteLength));
    if (!this.stream.send(payload)) await this.stream.onDrain({ signal });
  }

  async writeJson(value: unknown, signal?: AbortSignal): Promise<void> {
    await this.write(new TextEncoder().encode(JSON.stringify(value)), signal);
  }

  /** Close our writing side and wait (bounded) for the remote to finish. */
  async close(signal?: AbortSignal): Promise<void> {
    try {
      await this.stream.close({ signal: signal ?? AbortSignal.timeout(this.options.readTimeoutMs) });
    } catch (err) {
      this.stream.abort(err as Error);
    }
  }

  abort(error: Error): void {
    this.stream.abort(error);
  }
}

async function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {});
    throw abortReasonToError(signal.reason);
  }
  let onAbort: () => void = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortReasonToError(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
    // The stream is aborted by the caller on failure; its pending read then rejects and must not go unhandled.
    promise.catch(() => {});
  }
}

/** After an error frame, give the remote this long to read it before the stream is aborted. */
export const ERROR_LINGER_MS = 1_000;

/** Answer a failure with an error frame `{t:'error', name, message}`, close, and abort the stream soon after. */
export async function sendErrorFrame(frames: FrameStream, err: unknown): Promise<void> {
  const error = err instanceof Error ? err : new Error(String(err));
  try {
    await frames.writeJson({ t: 'error', name: error.name.slice(0, 200), message: error.message.slice(0, 4_000) }, AbortSignal.timeout(ERROR_LINGER_MS));
    await frames.close(AbortSignal.timeout(ERROR_LINGER_MS));
    // A hostile peer may never close its side: do not keep the stream for it.
    setTimeout(() => frames.abort(error), ERROR_LINGER_MS).unref();
  } catch {
    frames.abort(error);
  }
}
