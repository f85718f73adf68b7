import { randomBytes } from 'node:crypto';
import { connect, createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_DIRECT_OFFERS } from './constants.ts';
import { DirectOffers, crashDirectThreadForTest, receiveDirect } from './direct.ts';
import { RecordOpener, RecordSealer, newSessionKey, readRecords } from './sealed-records.ts';

const timeouts = { connectTimeoutMs: 5_000, idleTimeoutMs: 5_000 };
const offers = new DirectOffers(timeouts, '127.0.0.1');
afterEach(() => offers.closeAll());

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
    const offer = await offers.offer(4096, async (writer) => {
      for (const [index, bytes] of chunks.entries()) await writer.chunk(index, bytes);
      await writer.end();
    });
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

    const received: Array<[number, Buffer]> = [];
    await receiveDirect({ host: '127.0.0.1', offer, ...timeouts, maxChunkBytes: 4096, onChunk: async (index, pieces) => void received.push([index, Buffer.concat(pieces)]) });
    expect(received.map(([index, bytes]) => [index, bytes.equals(chunks[index])])).toEqual([
      [0, true],
      [1, true],
    ]);
  });

  it('is unavailable (not a failure of the fetch) when nothing listens at the offer', async () => {
    const offer = await offers.offer(4096, async (writer) => writer.end());
    offers.closeAll();
    await expect(receiveDirect({ host: '127.0.0.1', offer, ...timeouts, maxChunkBytes: 4096, onChunk: async () => undefined })).rejects.toMatchObject({
      name: 'DirectChannelUnavailableError',
    });
  });

  it('caps the offers open at once on a provider (the fetcher then uses the libp2p stream)', async () => {
    for (let i = 0; i < MAX_DIRECT_OFFERS; i++) await offers.offer(4096, async (writer) => writer.end());
    await expect(offers.offer(4096, async (writer) => writer.end())).rejects.toMatchObject({ name: 'DirectChannelUnavailableError' });
    offers.closeAll();
    await expect(offers.offer(4096, async (writer) => writer.end())).resolves.toMatchObject({ port: expect.any(Number) });
  });

  it('refuses a record altered on the way with SealedRecordError', async () => {
    const chunks = [randomBytes(3000), randomBytes(3000)];
    const offer = await offers.offer(4096, async (writer) => {
      for (const [index, bytes] of chunks.entries()) await writer.chunk(index, bytes);
      await writer.end();
    });
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
        receiveDirect({ host: '127.0.0.1', offer: { ...offer, port }, ...timeouts, maxChunkBytes: 4096, onChunk: async (index) => void received.push(index) }),
      ).rejects.toMatchObject({ name: 'SealedRecordError' });
      expect(received).toEqual([0]); // the first record was intact; nothing of the altered one came through
    } finally {
      relay.close();
    }
  });

  it('offers no channel (DirectChannelUnavailableError, so the fetcher uses the libp2p stream) when the thread dies before listening', async () => {
    crashDirectThreadForTest(); // reaches the thread before the offer's listen does
    await expect(offers.offer(4096, async (writer) => writer.end())).rejects.toMatchObject({ name: 'DirectChannelUnavailableError' });
    await expect(offers.offer(4096, async (writer) => writer.end())).resolves.toMatchObject({ port: expect.any(Number) });
  });

  it('fails its sessions with DirectThreadError when the thread dies, and the next session starts a new thread', async () => {
    const chunk = randomBytes(4096);
    const offer = await offers.offer(4096, async (writer) => {
      for (let index = 0; index < 100; index++) await writer.chunk(index, chunk);
      await writer.end();
    });
    const fetching = receiveDirect({
      host: '127.0.0.1',
      offer,
      ...timeouts,
      maxChunkBytes: 4096,
      // The crash reaches the thread before this chunk's slot is released: the session cannot finish first.
      onChunk: async (index) => void (index === 2 && crashDirectThreadForTest()),
    });
    await expect(fetching).rejects.toMatchObject({ name: 'DirectThreadError' });

    const next = await offers.offer(4096, async (writer) => {
      await writer.chunk(7, chunk);
      await writer.end();
    });
    const received: number[] = [];
    await receiveDirect({ host: '127.0.0.1', offer: next, ...timeouts, maxChunkBytes: 4096, onChunk: async (index) => void received.push(index) });
    expect(received).toEqual([7]);
  });
});
