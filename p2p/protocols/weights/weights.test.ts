import { randomBytes } from 'node:crypto';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, testNodes } from '../../testing/nodes.ts';
import type { SwarmNode, SwarmNodeOptions } from '../../node/node.ts';
import type { ManifestAnnouncement } from './weights.ts';
import { signManifest } from './manifest.ts';
import { crashDirectThreadForTest } from './direct.ts';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

const CHUNK = 64 * 1024;
const BLOB_BYTES = 20 * CHUNK + 123; // a short last chunk

async function connected(count: number, options: Partial<SwarmNodeOptions> = {}): Promise<SwarmNode[]> {
  const list: SwarmNode[] = [];
  for (let i = 0; i < count; i++) list.push(await nodes.start(options));
  for (const [i, node] of list.entries()) for (const other of list.slice(0, i)) await node.dial(other.multiaddrs()[0]);
  return list;
}

describe('/agentjet/weights/1', () => {
  it('announces a signed manifest and transfers the blob, verified, to the destination path', async () => {
    const [publisher, fetcher] = await connected(2);
    await eventually(() => fetcher.libp2p.services.pubsub.getSubscribers(fetcher.weights.topic).length > 0);
    const heard = new Promise<ManifestAnnouncement>((resolve) => fetcher.weights.onManifest(resolve));
    const blob = randomBytes(BLOB_BYTES);
    await publisher.weights.publish({ model: 'tiny', version: 3, source: { bytes: blob }, chunkSize: CHUNK });
    const announcement = await heard;
    expect(announcement.provider).toBe(publisher.peerId);
    expect(announcement.manifest).toMatchObject({ model: 'tiny', version: 3, totalBytes: BLOB_BYTES, chunkSize: CHUNK });
    expect(announcement.manifest.chunks).toHaveLength(21);
    expect(fetcher.weights.providers(announcement.manifest.sha256)).toEqual([publisher.peerId]);

    const dir = await nodes.tempDir();
    const destPath = join(dir, 'tiny-v3.bin');
    const result = await fetcher.weights.fetch(announcement.signed, { destPath });
    expect(Buffer.from(await readFile(destPath)).equals(blob)).toBe(true);
    expect(result.stats).toMatchObject({ chunksFetched: 21, chunksReused: 0, chunksRejected: 0, bytesFetched: BLOB_BYTES });
    expect(result.chunksByPath).toEqual({ direct: 21, libp2p: 0 }); // the bulk bytes took the direct channel
    expect(await readdir(dir)).toEqual(['tiny-v3.bin']); // no partial file left behind
  });

  it('serves a blob from a file path and answers manifest requests directly', async () => {
    const [publisher, fetcher] = await connected(2);
    const dir = await nodes.tempDir();
    const source = join(dir, 'weights.safetensors');
    const blob = randomBytes(BLOB_BYTES);
    await writeFile(source, blob);
    await publisher.weights.publish({ model: 'tiny', version: 1, source: { path: source }, chunkSize: CHUNK, announce: false });
    const signed = await fetcher.weights.fetchManifest(publisher.peerId, 'tiny', 1);
    await fetcher.weights.fetch(signed, { providers: [publisher.peerId], destPath: join(dir, 'copy') });
    expect(Buffer.from(await readFile(join(dir, 'copy'))).equals(blob)).toBe(true);
    await expect(fetcher.weights.fetchManifest(publisher.peerId, 'tiny', 2)).rejects.toMatchObject({ name: 'UnknownBlobError' });
  });

  it('refuses a forged manifest before fetching a single chunk', async () => {
    const [publisher, fetcher] = await connected(2);
    let chunksServed = 0;
    const blob = randomBytes(BLOB_BYTES);
    const signed = await publisher.weights.publish({ model: 'tiny', version: 1, source: { bytes: blob }, chunkSize: CHUNK, announce: false });
    const destPath = join(await nodes.tempDir(), 'out');
    const onChunk = () => (chunksServed += 1);

    // Altered after signing: a bigger version number.
    const altered = { ...signed, manifest: signed.manifest.replace('"version":1', '"version":2') };
    await expect(fetcher.weights.fetch(altered, { providers: [publisher.peerId], destPath, onChunk })).rejects.toMatchObject({ name: 'ManifestSignatureError' });

    // Signed by another key while claiming to come from the publisher.
    const impostorKey = await generateKeyPair('Ed25519');
    const impostor = await signManifest(JSON.parse(signed.manifest), impostorKey, peerIdFromPrivateKey(impostorKey).toString());
    const claimed = { ...impostor, signer: publisher.peerId };
    await expect(fetcher.weights.fetch(claimed, { providers: [publisher.peerId], destPath, onChunk })).rejects.toMatchObject({ name: 'ManifestSignatureError' });
    expect(chunksServed).toBe(0);
  });

  it('rejects a corrupted chunk and fetches it again from another provider', async () => {
    const [publisher, mirror, fetcher] = await connected(3);
    const dir = await nodes.tempDir();
    const blob = randomBytes(BLOB_BYTES);
    const signed = await publisher.weights.publish({ model: 'tiny', version: 1, source: { bytes: blob }, chunkSize: CHUNK, announce: false });
    // The mirror's copy rotted on disk after it was verified: chunk 5 has one flipped byte.
    const mirrorCopy = Buffer.from(blob);
    mirrorCopy[5 * CHUNK + 10] ^= 0xff;
    const mirrorPath = join(dir, 'mirror.bin');
    await writeFile(mirrorPath, mirrorCopy);
    await mirror.weights.serveExisting(signed, { path: mirrorPath }, { announce: false });

    const destPath = join(dir, 'out.bin');
    const result = await fetcher.weights.fetch(signed, { providers: [mirror.peerId, publisher.peerId], destPath });
    expect(Buffer.from(await readFile(destPath)).equals(blob)).toBe(true);
    expect(result.stats.chunksRejected).toBe(1);
    expect(result.stats.chunksFetched).toBe(21);
    expect(fetcher.violations.count(mirror.libp2p.peerId)).toBe(1);
  });

  it('resumes an interrupted fetch without fetching verified chunks again', async () => {
    const [publisher, fetcher] = await connected(2);
    const blob = randomBytes(BLOB_BYTES);
    const signed = await publisher.weights.publish({ model: 'tiny', version: 1, source: { bytes: blob }, chunkSize: CHUNK, announce: false });
    const dir = await nodes.tempDir();
    const destPath = join(dir, 'out.bin');

    const interrupt = new AbortController();
    const first = fetcher.weights.fetch(signed, {
      providers: [publisher.peerId],
      destPath,
      signal: interrupt.signal,
      onChunk: (_index, stats) => {
        if (stats.chunksFetched === 6) interrupt.abort();
      },
    });
    // The fetch ends by our own abort (the stream is aborted with it), not by a failure of its own.
    await expect(first).rejects.toMatchObject({ name: expect.stringMatching(/^(StreamAbortedError|AbortError)$/) });
    expect((await readdir(dir)).some((name) => name.endsWith('.partial'))).toBe(true);
    expect((await readdir(dir)).includes('out.bin')).toBe(false); // nothing handed over unverified

    const second = await fetcher.weights.fetch(signed, { providers: [publisher.peerId], destPath });
    expect(second.stats.chunksReused).toBeGreaterThanOrEqual(6);
    expect(second.stats.chunksReused + second.stats.chunksFetched).toBe(21);
    expect(Buffer.from(await readFile(destPath)).equals(blob)).toBe(true);
  });

  it('fails with NoProviderError when no provider can deliver', async () => {
    const [publisher, fetcher] = await connected(2);
    const signed = await publisher.weights.publish({ model: 'tiny', version: 1, source: { bytes: randomBytes(CHUNK) }, chunkSize: CHUNK, announce: false });
    publisher.weights.unserve('tiny', 1);
    const destPath = join(await nodes.tempDir(), 'out.bin');
    await expect(fetcher.weights.fetch(signed, { providers: [publisher.peerId], destPath })).rejects.toMatchObject({ name: 'NoProviderError' });
  });

  describe('when the direct channel is not available', () => {
    const fetchFrom = async (publisher: SwarmNode, fetcher: SwarmNode, options: { direct?: boolean } = {}) => {
      const blob = randomBytes(BLOB_BYTES);
      const signed = await publisher.weights.publish({ model: 'tiny', version: 1, source: { bytes: blob }, chunkSize: CHUNK, announce: false });
      const destPath = join(await nodes.tempDir(), 'out.bin');
      const result = await fetcher.weights.fetch(signed, { providers: [publisher.peerId], destPath, ...options });
      expect(Buffer.from(await readFile(destPath)).equals(blob)).toBe(true);
      return result;
    };

    it('falls back to the libp2p stream when the provider offers none', async () => {
      const [publisher, fetcher] = await connected(2, { weights: { directTransfer: false } });
      expect((await fetchFrom(publisher, fetcher)).chunksByPath).toEqual({ direct: 0, libp2p: 21 });
    });

    it('falls back to the libp2p stream when the offered endpoint cannot be reached', async () => {
      // The provider's direct listener is bound where the fetcher cannot reach it (as behind a firewall).
      const [publisher, fetcher] = await connected(2, { weights: { directHost: '127.0.0.2', directConnectTimeoutMs: 2_000 } });
      expect((await fetchFrom(publisher, fetcher)).chunksByPath).toEqual({ direct: 0, libp2p: 21 });
    });

    it('carries on over the libp2p stream when the direct channel\'s thread dies mid-fetch', async () => {
      const [publisher, fetcher] = await connected(2);
      const blob = randomBytes(BLOB_BYTES);
      const signed = await publisher.weights.publish({ model: 'tiny', version: 1, source: { bytes: blob }, chunkSize: CHUNK, announce: false });
      const dir = await nodes.tempDir();
      const destPath = join(dir, 'out.bin');
      crashDirectThreadForTest(3); // as the fetcher opens the fourth chunk
      const result = await fetcher.weights.fetch(signed, { providers: [publisher.peerId], destPath });
      expect(Buffer.from(await readFile(destPath)).equals(blob)).toBe(true);
      expect(result.stats).toMatchObject({ chunksFetched: 21, chunksRejected: 0 });
      expect(result.chunksByPath.direct).toBeLessThanOrEqual(3);
      expect(result.chunksByPath.libp2p).toBeGreaterThanOrEqual(18);
      expect(result.chunksByPath.direct + result.chunksByPath.libp2p).toBe(21); // no chunk fetched twice
      expect(await readdir(dir)).toEqual(['out.bin']);
    });

    it('keeps every byte on the libp2p stream when the fetcher asks for that', async () => {
      const [publisher, fetcher] = await connected(2);
      expect((await fetchFrom(publisher, fetcher, { direct: false })).chunksByPath).toEqual({ direct: 0, libp2p: 21 });
    });
  });
});
