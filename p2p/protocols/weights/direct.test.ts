import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_DIRECT_OFFERS } from './constants.ts';
import { DirectOffers, crashDirectThreadForTest, receiveDirect } from './direct.ts';
import type { DirectOffer } from './direct.ts';
import type { ChunkTarget } from './download.ts';
import { RecordOpener, RecordSealer, newSessionKey, readRecords } from './sealed-records.ts';

const timeouts = { connectTimeoutMs: 5_000, idleTimeoutMs: 5_000 };
const offers = new DirectOffers(timeouts, '127.0.0.1');
const dirs: string[] = [];
afterEach(async () => {
  offers.closeAll();
  await Promise.all(dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

const CHUNK_BYTES = 4096;

/** A zeroed partial file for `chunks` and the manifest entries they must match. */
async function targetFor(chunks: Buffer[]): Promise<ChunkTarget> {
  const dir = await mkdtemp(join(tmpdir(), 'agentjet-direct-'));
  dirs.push(dir);
  const path = join(dir, 'blob.partial');
  await writeFile(path, Buffer.alloc(chunks.length * CHUNK_BYTES));
  const entries = chunks.map((bytes, index) => ({ index, bytes: bytes.byteLength, sha256: createHash('sha256').update(bytes).digest('hex') }));
  return { path, chunkSize: CHUNK_BYTES, chunks: entries };
}

/** The bytes the target's file holds where chunk `index` goes. */
async function landedBytes(target: ChunkTarget, index: number): Promise<Buffer> {
  return (await readFile(target.path)).subarray(index * CHUNK_BYTES, index * CHUNK_BYTES + target.chunks[index].bytes);
}

const all = (target: ChunkTarget) => target.chunks.map((chunk) => chunk.index);

/** The blob `chunks` make (chunk i at i times CHUNK_BYTES), in shared memory. */
function sharedBlob(chunks: Buffer[]): Uint8Array {
  const shared = new Uint8Array(new SharedArrayBuffer(chunks.length * CHUNK_BYTES));
  for (const [index, bytes] of chunks.entries()) shared.set(bytes, index * CHUNK_BYTES);
  return shared;
}

/** Offer `chunks` from shared memory: those at `indices` (default all), each as long as it is. */
function offerChunks(chunks: Buffer[], indices = chunks.map((_, index) => index)): Promise<DirectOffer> {
  return offers.offer({ shared: sharedBlob(chunks) }, CHUNK_BYTES, indices.map((index) => ({ index, bytes: chunks[index].byteLength })));
}

async function* bytesOf(buffers: Buffer[]): AsyncGenerator<Buffer> {
  // Split across arbitrary boundaries, the way a socket delivers them.
  const whole = Buffer.concat(buffers);
  for (let offset = 0; offset < whole.byteLength; offset += 1000) yield whole.subarray(offset, offset + 1000);
}

async function collect(source: AsyncIterable<Buffer[]>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const pieces of source) out.push(Buffer.concat(pieces));
  return out;
}

describe('sealed records', () => {
  it('round-trip in order across arbitrary read boundaries', async () => {
    const key = newSessionKey();
    const sealer = new RecordSealer(key, 'provider');
    const payloads = [randomBytes(5000), randomBytes(1), randomBytes(12_345)];
    const wire = payloads.flatMap((payload) => sealer.seal([payload.subarray(0, 7), payload.subarray(7)]));
    const opened = await collect(readRecords(bytesOf(wire), new RecordOpener(key, 'provider'), 20_000));
    expect(opened.map((b) => b.toString('hex'))).toEqual(payloads.map((b) => b.toString('hex')));
  });

  it('refuse a flipped bit, the wrong key, the other direction and an oversized record', async () => {
    const key = newSessionKey();
    const record = () => new RecordSealer(key, 'provider').seal([randomBytes(100)]);
    const tampered = Buffer.concat(record());
    tampered[20] ^= 1;
    const open = (wire: Buffer[], opener: RecordOpener, max = 1000) => collect(readRecords(bytesOf(wire), opener, max));
    await expect(open([tampered], new RecordOpener(key, 'provider'))).rejects.toMatchObject({ name: 'SealedRecordError' });
    await expect(open(record(), new RecordOpener(newSessionKey(), 'provider'))).rejects.toMatchObject({ name: 'SealedRecordError' });
    await expect(open(record(), new RecordOpener(key, 'fetcher'))).rejects.toMatchObject({ name: 'SealedRecordError' });
    await expect(open(record(), new RecordOpener(key, 'provider'), 50)).rejects.toMatchObject({ name: 'SealedRecordError' });
    const truncated = Buffer.concat(record()).subarray(0, 60);
    await expect(open([truncated], new RecordOpener(key, 'provider'))).rejects.toMatchObject({ name: 'UnexpectedEndOfStreamError' });
  });
});

describe('direct channel', () => {
  it('serves its one session to the fetcher that holds the key, not to a stranger who connects first', async () => {
    const chunks = [randomBytes(3000), randomBytes(10)];
    const offer = await offerChunks(chunks);
    const stranger = connect({ host: '127.0.0.1', port: offer.port });
    const strangerClosed = new Promise<Buffer>((resolve) => {
      const received: Buffer[] = [];
      stranger.on('data', (data: Buffer) => received.push(data));
      stranger.on('close', () => resolve(Buffer.concat(received)));
      stranger.on('error', () => undefined);
    });
    await new Promise((resolve) => stranger.once('connect', resolve));
    // A made-up hello: well-formed record, wrong key.
    for (const buffer of new RecordSealer(newSessionKey(), 'fetcher').seal([Buffer.from('hello')])) stranger.write(buffer);
    expect((await strangerClosed).byteLength).toBe(0);

    const target = await targetFor(chunks);
    const received: Array<[number, boolean]> = [];
    await receiveDirect({ host: '127.0.0.1', offer, ...timeouts, target, indices: all(target), onChunk: (index, matched) => void received.push([index, matched]) });
    expect(received).toEqual([
      [0, true],
      [1, true],
    ]);
    expect((await landedBytes(target, 0)).equals(chunks[0])).toBe(true);
    expect((await landedBytes(target, 1)).equals(chunks[1])).toBe(true);
  });

  it("sends the chunks of a blob's file, read by the thread itself", async () => {
    const chunks = [randomBytes(CHUNK_BYTES), randomBytes(CHUNK_BYTES), randomBytes(CHUNK_BYTES), randomBytes(77)];
    const target = await targetFor(chunks);
    const path = join(dirs[dirs.length - 1], 'blob');
    await writeFile(path, Buffer.concat(chunks));
    // Not in order, and not all of them.
    const indices = [3, 0, 2];
    const offer = await offers.offer({ path }, CHUNK_BYTES, indices.map((index) => ({ index, bytes: chunks[index].byteLength })));
    const received: number[] = [];
    await receiveDirect({ host: '127.0.0.1', offer, ...timeouts, target, indices, onChunk: (index, matched) => void (matched && received.push(index)) });
    expect(received.sort()).toEqual([0, 2, 3]);
    for (const index of indices) expect((await landedBytes(target, index)).equals(chunks[index])).toBe(true);
    expect((await landedBytes(target, 1)).equals(Buffer.alloc(CHUNK_BYTES))).toBe(true);
  });

  it('refuses a chunk that does not hash to the manifest: not written, and the others still are', async () => {
    const chunks = [randomBytes(3000), randomBytes(3000), randomBytes(3000)];
    const target = await targetFor(chunks);
    const rotten = Buffer.from(chunks[1]);
    rotten[100] ^= 1;
    // The provider's copy: chunk 1 rotted, chunk 2 one byte short.
    const shared = sharedBlob([chunks[0], rotten, chunks[2]]);
    const offer = await offers.offer({ shared }, CHUNK_BYTES, [
      { index: 0, bytes: 3000 },
      { index: 1, bytes: 3000 },
      { index: 2, bytes: 2999 },
    ]);
    const received: Array<[number, boolean]> = [];
    await receiveDirect({ host: '127.0.0.1', offer, ...timeouts, target, indices: all(target), onChunk: (index, matched) => void received.push([index, matched]) });
    expect(received.sort()).toEqual([
      [0, true],
      [1, false],
      [2, false],
    ]);
    expect((await landedBytes(target, 0)).equals(chunks[0])).toBe(true);
    expect((await landedBytes(target, 1)).equals(Buffer.alloc(3000))).toBe(true);
    expect((await landedBytes(target, 2)).equals(Buffer.alloc(3000))).toBe(true);
  });

  it('fails with ChunkHashMismatchError when the provider sends a chunk that was not asked for', async () => {
    const chunks = [randomBytes(3000), randomBytes(3000)];
    const target = await targetFor(chunks);
    const offer = await offerChunks(chunks, [1]);
    const received: number[] = [];
    await expect(receiveDirect({ host: '127.0.0.1', offer, ...timeouts, target, indices: [0], onChunk: (index) => void received.push(index) })).rejects.toMatchObject({
      name: 'ChunkHashMismatchError',
    });
    expect(received).toEqual([]);
    expect((await landedBytes(target, 1)).equals(Buffer.alloc(3000))).toBe(true);
  });

  it('refuses to offer bytes that are not in shared memory', async () => {
    await expect(offers.offer({ shared: new Uint8Array(10) }, CHUNK_BYTES, [{ index: 0, bytes: 10 }])).rejects.toMatchObject({ name: 'TypeError' });
  });

  it('is unavailable (not a failure of the fetch) when nothing listens at the offer', async () => {
    const chunks = [randomBytes(10)];
    const offer = await offerChunks(chunks);
    offers.closeAll();
    const target = await targetFor(chunks);
    await expect(receiveDirect({ host: '127.0.0.1', offer, ...timeouts, target, indices: [0], onChunk: () => undefined })).rejects.toMatchObject({
      name: 'DirectChannelUnavailableError',
    });
  });

  it('caps the offers open at once on a provider (the fetcher then uses the libp2p stream)', async () => {
    const chunks = [randomBytes(10)];
    for (let i = 0; i < MAX_DIRECT_OFFERS; i++) await offerChunks(chunks);
    await expect(offerChunks(chunks)).rejects.toMatchObject({ name: 'DirectChannelUnavailableError' });
    offers.closeAll();
    await expect(offerChunks(chunks)).resolves.toMatchObject({ port: expect.any(Number) });
  });

  it('refuses a record altered on the way with SealedRecordError', async () => {
    const chunks = [randomBytes(3000), randomBytes(3000)];
    const target = await targetFor(chunks);
    const offer = await offerChunks(chunks);
    // A relay that flips one bit of what the provider sends, inside the second record's ciphertext.
    let relayed = 0;
    const relay = createServer((client) => {
      const upstream = connect({ host: '127.0.0.1', port: offer.port });
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
      client.pipe(upstream);
      upstream.on('data', (data: Buffer) => {
        const flip = 3000 + 100 - relayed;
        if (flip >= 0 && flip < data.byteLength) data[flip] ^= 1;
        relayed += data.byteLength;
        client.write(data);
      });
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const received: number[] = [];
    try {
      const port = (relay.address() as AddressInfo).port;
      await expect(
        receiveDirect({ host: '127.0.0.1', offer: { ...offer, port }, ...timeouts, target, indices: all(target), onChunk: (index) => void received.push(index) }),
      ).rejects.toMatchObject({ name: 'SealedRecordError' });
      expect(received).toEqual([0]); // the first record was intact; nothing of the altered one came through
      expect((await landedBytes(target, 1)).equals(Buffer.alloc(3000))).toBe(true);
    } finally {
      relay.close();
    }
  });

  it('offers no channel (DirectChannelUnavailableError, so the fetcher uses the libp2p stream) when the thread dies before listening', async () => {
    const chunks = [randomBytes(10)];
    crashDirectThreadForTest(); // reaches the thread before the offer's listen does
    await expect(offerChunks(chunks)).rejects.toMatchObject({ name: 'DirectChannelUnavailableError' });
    await expect(offerChunks(chunks)).resolves.toMatchObject({ port: expect.any(Number) });
  });

  it('fails its sessions with DirectThreadError when the thread dies, and the next session starts a new thread', async () => {
    const chunks = Array.from({ length: 8 }, () => randomBytes(CHUNK_BYTES));
    const target = await targetFor(chunks);
    const offer = await offerChunks(chunks);
    crashDirectThreadForTest(2); // as the fetcher opens the third chunk, before it is written
    const received: number[] = [];
    await expect(receiveDirect({ host: '127.0.0.1', offer, ...timeouts, target, indices: all(target), onChunk: (index) => void received.push(index) })).rejects.toMatchObject({
      name: 'DirectThreadError',
    });
    expect(received.length).toBeLessThanOrEqual(2);

    const next = await offerChunks(chunks, [7]);
    received.length = 0;
    await receiveDirect({ host: '127.0.0.1', offer: next, ...timeouts, target, indices: [7], onChunk: (index) => void received.push(index) });
    expect(received).toEqual([7]);
    expect((await landedBytes(target, 7)).equals(chunks[7])).toBe(true);
  });
});
