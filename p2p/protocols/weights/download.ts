/**
 * Resumable, verified download of a manifest's blob into `destPath`.
 *
 * Chunks land in a partial file next to the destination (named after the blob's hash, so different
 * versions never mix). On a restart every chunk already in the partial file is re-hashed, and the ones that
 * verify are kept: no bookkeeping file can disagree with the data. Each received chunk is hashed against the
 * manifest before it is written: here, or for the direct channel in its own thread (direct-thread.ts), which is
 * handed the partial file and the chunks' hashes and reports each chunk written or refused. A bad one is re-queued,
 * preferably for another provider.
 *
 * The blob is verified chunk by chunk and not hashed again as a whole: the signed manifest holds every chunk's
 * sha256 and size, and verifyManifest checks that the chunks tile the blob, so a blob whose every chunk verified
 * is the signer's blob. The manifest's whole-blob `sha256` names the blob; a second hash over it would prove
 * nothing more and cost as much CPU as the chunk hashes (it halved the direct channel's throughput).
 * Only when every chunk has landed is the partial file synced and renamed onto `destPath` (atomic on one file
 * system).
 */
import { open, rename } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { isExpectedChunk, readExactly, writeAll } from './chunk-file.ts';
import type { ChunkPieces } from './chunk-file.ts';
import { CHUNKS_PER_REQUEST, FETCH_CONCURRENCY, MAX_CHUNK_ATTEMPTS, MAX_PROVIDER_FAILURES, SYNC_EVERY_BYTES } from './constants.ts';
import { ChunkHashMismatchError, NoProviderError } from './errors.ts';
import type { WeightsManifest } from './manifest.ts';

/** The partial file and what its chunks must be: all that a provider needs to check and write chunks itself. */
export interface ChunkTarget {
  path: string;
  chunkSize: number;
  /** The signed manifest's chunks, by index. */
  chunks: WeightsManifest['chunks'];
}

/** Where a provider puts the chunks of one request. */
export interface ChunkSink {
  target: ChunkTarget;
  /** A chunk's bytes: hashed against the manifest here and written when they match. */
  deliver(index: number, pieces: ChunkPieces): Promise<void>;
  /** A chunk the provider hashed against `target.chunks` itself: written to `target.path` when it matched, not written when not. */
  landed(index: number, matched: boolean): void;
}

/** A provider, as the download sees it: something that delivers chunks by index. */
export interface ChunkProvider {
  id: string;
  fetchChunks(indices: number[], sink: ChunkSink, signal?: AbortSignal): Promise<void>;
}

export interface DownloadStats {
  chunksFetched: number;
  /** Chunks found already verified in the partial file (resume). */
  chunksReused: number;
  /** Chunks received with a wrong hash (and fetched again). */
  chunksRejected: number;
  bytesFetched: number;
}

export interface DownloadOptions {
  manifest: WeightsManifest;
  destPath: string;
  providers: ChunkProvider[];
  signal?: AbortSignal;
  /** After each verified chunk is written. */
  onChunk?: (index: number, stats: DownloadStats) => void;
  /** When a provider sent a chunk with a wrong hash. */
  onRejected?: (providerId: string, index: number) => void;
}

export function partialPathFor(destPath: string, manifest: WeightsManifest): string {
  return `${destPath}.${manifest.sha256.slice(0, 16)}.partial`;
}

export async function downloadBlob(options: DownloadOptions): Promise<DownloadStats> {
  const { manifest, destPath } = options;
  const partialPath = partialPathFor(destPath, manifest);
  const stats: DownloadStats = { chunksFetched: 0, chunksReused: 0, chunksRejected: 0, bytesFetched: 0 };
  const { handle, existed } = await openPartial(partialPath, manifest.totalBytes);
  const sync = new BackgroundSync(handle);
  try {
    const pending = existed ? await findMissingChunks(handle, manifest, stats) : manifest.chunks.map((c) => c.index);
    const target: ChunkTarget = { path: partialPath, chunkSize: manifest.chunkSize, chunks: manifest.chunks };
    await fetchMissing(handle, target, pending, stats, options, sync);
    // Data (and the size) on disk before the rename: fdatasync, the timestamps need not be.
    await sync.finish();
  } finally {
    await sync.settled();
    await handle.close();
  }
  await rename(partialPath, destPath);
  return stats;
}

async function openPartial(path: string, totalBytes: number): Promise<{ handle: FileHandle; existed: boolean }> {
  let existed = true;
  let handle: FileHandle;
  try {
    handle = await open(path, 'r+');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    existed = false;
    handle = await open(path, 'w+');
  }
  if ((await handle.stat()).size !== totalBytes) await handle.truncate(totalBytes);
  return { handle, existed };
}

/** Resume: keep every chunk of the partial file whose bytes already hash right. */
async function findMissingChunks(handle: FileHandle, manifest: WeightsManifest, stats: DownloadStats): Promise<number[]> {
  const buffer = new Uint8Array(manifest.chunkSize);
  const missing: number[] = [];
  for (const chunk of manifest.chunks) {
    await readExactly(handle, buffer, chunk.bytes, chunk.index * manifest.chunkSize);
    if (isExpectedChunk([buffer.subarray(0, chunk.bytes)], chunk)) stats.chunksReused += 1;
    else missing.push(chunk.index);
  }
  return missing;
}

async function fetchMissing(
  handle: FileHandle,
  target: ChunkTarget,
  pending: number[],
  stats: DownloadStats,
  options: DownloadOptions,
  sync: BackgroundSync,
): Promise<void> {
  const { manifest, providers, signal } = options;
  const queue = [...pending];
  const attempts = new Map<number, number>();
  /** Providers that sent a bad copy of a chunk: asked again for it only when nobody else is left. */
  const badFor = new Map<number, Set<string>>();
  const failures = new Map<string, number>();
  const alive = () => providers.filter((p) => (failures.get(p.id) ?? 0) < MAX_PROVIDER_FAILURES);
  let nextProvider = 0;
  let inFlight = 0;
  let fatal: Error | undefined;

  const pickProvider = (indices: number[]): ChunkProvider | undefined => {
    const candidates = alive();
    if (candidates.length === 0) return undefined;
    const clean = candidates.filter((p) => indices.every((i) => !badFor.get(i)?.has(p.id)));
    const pool = clean.length > 0 ? clean : candidates;
    return pool[nextProvider++ % pool.length];
  };

  /** The sink of one request to `provider`: `requested` loses each index as its chunk arrives. */
  const sinkFor = (provider: ChunkProvider, requested: Set<number>): ChunkSink => {
    const take = (index: number) => {
      const expected = manifest.chunks[index];
      if (!requested.delete(index) || !expected) throw new ChunkHashMismatchError(`chunk ${index} was not requested`);
      return expected;
    };
    const refuse = (index: number) => {
      stats.chunksRejected += 1;
      options.onRejected?.(provider.id, index);
      if (!badFor.has(index)) badFor.set(index, new Set());
      badFor.get(index)?.add(provider.id);
      requeue(index);
    };
    const written = (index: number, bytes: number) => {
      sync.written(bytes);
      stats.chunksFetched += 1;
      stats.bytesFetched += bytes;
      options.onChunk?.(index, stats);
    };
    return {
      target,
      deliver: async (index, pieces) => {
        const expected = take(index);
        if (!isExpectedChunk(pieces, expected)) return refuse(index);
        // No fsync here: one sync of the whole file before the rename makes the hand-over durable.
        await writeAll(handle, pieces, index * manifest.chunkSize);
        written(index, expected.bytes);
      },
      landed: (index, matched) => {
        const expected = take(index);
        if (matched) written(index, expected.bytes);
        else refuse(index);
      },
    };
  };

  const requeue = (index: number) => {
    const tries = (attempts.get(index) ?? 0) + 1;
    attempts.set(index, tries);
    if (tries >= MAX_CHUNK_ATTEMPTS) fatal ??= new ChunkHashMismatchError(`chunk ${index} failed verification ${tries} times`);
    else queue.push(index);
  };

  // One stream per provider: two to the same provider compete for its CPU and ours; measured on loopback (when a
  // whole-blob hash also waited for chunks in order), that halved the throughput.
  const workers = Math.max(1, Math.min(FETCH_CONCURRENCY, providers.length, queue.length));
  // Big requests, but not so big that one provider takes every chunk while another waits.
  const batchSize = Math.max(1, Math.min(CHUNKS_PER_REQUEST, Math.ceil(queue.length / workers)));

  const worker = async () => {
    while (!fatal) {
      signal?.throwIfAborted();
      if (queue.length === 0) {
        if (inFlight === 0) return;
        // Another worker may requeue chunks it fails to get: wait for it rather than exit early.
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      const batch = queue.splice(0, batchSize);
      const provider = pickProvider(batch);
      if (!provider) {
        fatal = new NoProviderError('no provider left for the missing chunks');
        return;
      }
      const requested = new Set(batch);
      inFlight += 1;
      try {
        await provider.fetchChunks(batch, sinkFor(provider, requested), signal);
        if (requested.size > 0) throw new NoProviderError(`provider ${provider.id} skipped ${requested.size} chunks`);
      } catch (err) {
        if (signal?.aborted) throw err;
        failures.set(provider.id, (failures.get(provider.id) ?? 0) + 1);
        queue.push(...requested);
      } finally {
        inFlight -= 1;
      }
    }
  };

  await Promise.all(Array.from({ length: workers }, worker));
  if (fatal) throw fatal;
  if (queue.length > 0) throw new NoProviderError('chunks are still missing');
}

/**
 * fdatasync started in the background every SYNC_EVERY_BYTES written, so that the disk writes the blob while the
 * network delivers it and the sync before the rename has little left to do. One sync at a time.
 */
class BackgroundSync {
  private unsynced = 0;
  private running: Promise<void> = Promise.resolve();
  private failure: unknown;

  constructor(private readonly handle: FileHandle) {}

  written(bytes: number): void {
    this.unsynced += bytes;
    if (this.unsynced < SYNC_EVERY_BYTES) return;
    this.unsynced = 0;
    this.running = this.running.then(() => this.handle.datasync()).catch((err: unknown) => void (this.failure ??= err));
  }

  /** Every byte written so far is on disk; throws what a background sync failed with. */
  async finish(): Promise<void> {
    await this.running;
    if (this.failure !== undefined) throw this.failure;
    await this.handle.datasync();
  }

  /** No sync is running (before the file is closed). */
  settled(): Promise<void> {
    return this.running;
  }
}
