/**
 * The direct channel's data plane, run in a worker thread of its own (direct.ts starts it): the sockets, the sealed
 * records (AES-GCM both ways), the provider's reads of the blob, and the fetcher's sha256 of each chunk and its write
 * into the partial file.
 *
 * Why a thread: at a gigabyte a second the records' buffers churn the heap that holds them. In the peer's main
 * isolate (tens of MB of libp2p state) that churn cost a mark-compact every ~50 ms once V8's memory reducer had
 * switched the heap to slow growth, which it does after any idle spell (measured: 440 → 230 MB/s). This isolate's
 * heap is small, so the same collections cost little.
 *
 * The main threads only set sessions up and hear how they went; chunk bytes never cross to them. Provider: this
 * thread reads each requested chunk from the blob's file (the next read overlapping this chunk's sealing) or seals it
 * straight from the blob in shared memory, and keeps a few chunks' worth queued on the socket. Fetcher: this thread
 * reads the socket into one reused buffer, opens each record, hashes the chunk against the signed manifest's sha256
 * (which the main thread passed) and writes it into the partial file through a descriptor of its own; the main thread
 * hears which chunks were written and which were refused. Chunk bytes used to cross between the threads through
 * shared slots: V8 copies shared memory word by word, and that copy cost as much as AES-GCM on each side, and each
 * chunk also waited for turns of both main threads.
 */
import { once } from 'node:events';
import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import type { AddressInfo, OnReadOpts, Server, Socket } from 'node:net';
import { parentPort } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';
import { ReadTimeoutError, StreamAbortedError, UnexpectedEndOfStreamError } from '../../framing/errors.ts';
import { isExpectedChunk, readExactly, writeAll } from './chunk-file.ts';
import type { ExpectedChunk } from './chunk-file.ts';
import { ChunkHashMismatchError, DirectChannelUnavailableError, SealedRecordError } from './errors.ts';
import { RecordOpener, RecordReader, RecordSealer, readRecords, splitHead } from './sealed-records.ts';

/** A session's error, flattened to cross the thread boundary (rebuilt by name on the other side). */
export interface FlatError {
  name: string;
  message: string;
}

export interface SessionTimeouts {
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/** A served blob as the provider's thread reads it: its file, or its bytes in shared memory (a view of a SharedArrayBuffer). */
export type ThreadBlob = { path: string } | { shared: Uint8Array };

/** A chunk the provider's thread sends: at `index` times the chunk size in the blob, `bytes` long. */
export interface ChunkToSend {
  index: number;
  bytes: number;
}

/** Main thread → this thread. Each message names its session by `id`. */
export type ToThread =
  /**
   * Provider: open a one-time listener; the first connection that proves the key gets `chunks` of `blob`, sealed, then
   * the end record (answered by `done`).
   */
  | ({ op: 'listen'; id: number; key: Uint8Array; host?: string; blob: ThreadBlob; chunkSize: number; chunks: ChunkToSend[] } & SessionTimeouts)
  /**
   * Fetcher: connect, say hello and receive `chunks`: each is hashed, and written into the file at `path` (at its
   * index times `chunkSize`) when it matches.
   */
  | ({ op: 'fetch'; id: number; host: string; port: number; key: Uint8Array; path: string; chunkSize: number; chunks: ExpectedChunk[] } & SessionTimeouts)
  /** Either side: drop the session (a cancelled fetch, a provider that failed, a closing peer). */
  | { op: 'close'; id: number; error?: FlatError }
  /** Tests only: this thread dies as a crash would, at once or when its fetchers have opened `afterChunks` more chunks. */
  | { op: 'crash'; afterChunks?: number };

/** This thread → main thread. */
export type FromThread =
  | { op: 'listening'; id: number; port: number }
  /** Fetcher: a chunk came; `matched`: it hashed right and is written, else it is not written. */
  | { op: 'chunk'; id: number; index: number; matched: boolean }
  /**
   * The session ended well (provider: all sent; fetcher: the end record came). A fetcher session's last message is
   * this or `failed`, sent once its writes are over and its file is closed, however it ended.
   */
  | { op: 'done'; id: number }
  /** Provider: the listener closed unused (no fetcher proved the key in time). */
  | { op: 'expired'; id: number }
  | { op: 'failed'; id: number; error: FlatError };

const HELLO = new TextEncoder().encode('agentjet-weights-direct-hello-v1');
/** Chunk index of the record that ends a session. */
const END_INDEX = 0xffffffff;
const INDEX_BYTES = 4;
/**
 * Sealed bytes queued on the socket before the provider waits for it to drain. The socket's own mark (16 KiB) would
 * make it wait after every chunk: it then seals the next chunk while the fetcher waits, and waits while the fetcher
 * verifies. A few chunks' worth keeps both busy, and bounds what one session holds.
 */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;
/**
 * The fetcher's socket reads land in one buffer of this size, reused (a fresh buffer per read is garbage at a
 * gigabyte a second): a few records' worth of 64 KiB cipher pieces per read, fewer syscalls than the default 64 KiB.
 */
const READ_BUFFER_BYTES = 256 * 1024;
/**
 * Verified chunks the fetcher may have being written at once before it stops reading the socket: the disk takes
 * them while the next ones are opened and hashed, and the file's writes hold at most this many chunks of memory.
 */
const WRITES_IN_FLIGHT = 4;

/** Tests only: chunks the fetchers may still open before this thread dies (`crash` with `afterChunks`). */
let crashCountdown: number | undefined;

const flatten = (err: unknown): FlatError =>
  err instanceof Error ? { name: err.name, message: err.message } : { name: 'Error', message: String(err) };

/** A session of either side; `close` ends it once, with `failed` unless it ended well. */
abstract class Session {
  protected socket: Socket | undefined;
  protected readonly closed = new AbortController();

  constructor(
    readonly id: number,
    protected readonly port: MessagePort,
    private readonly sessions: Map<number, Session>,
  ) {}

  close(error?: unknown): void {
    if (this.closed.signal.aborted) return;
    this.stop(error);
    if (error !== undefined) this.port.postMessage({ op: 'failed', id: this.id, error: flatten(error) } satisfies FromThread);
  }

  /** Drops the session and its socket; whatever it was waiting for ends. */
  protected stop(reason?: unknown): void {
    this.closed.abort(reason);
    this.sessions.delete(this.id);
    this.socket?.destroy();
  }

  /** The session's socket: one that closes or goes silent before the session ended fails it. */
  protected watch(socket: Socket, idleTimeoutMs: number): void {
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setTimeout(idleTimeoutMs, () => this.close(new ReadTimeoutError('the direct connection went silent')));
    socket.on('error', () => undefined);
    socket.on('close', () => this.close(new StreamAbortedError('the direct connection closed')));
  }
}

class ProviderSession extends Session {
  private readonly server: Server = createServer();

  constructor(
    id: number,
    port: MessagePort,
    sessions: Map<number, Session>,
    private readonly request: Extract<ToThread, { op: 'listen' }>,
  ) {
    super(id, port, sessions);
  }

  async listen(): Promise<void> {
    const { request, server } = this;
    const expiry = setTimeout(() => {
      this.port.postMessage({ op: 'expired', id: this.id } satisfies FromThread);
      this.close();
    }, request.connectTimeoutMs);
    this.closed.signal.addEventListener('abort', () => {
      clearTimeout(expiry);
      server.close();
    });
    server.on('connection', (socket) => {
      if (this.socket || this.closed.signal.aborted) return socket.destroy();
      socket.on('error', () => undefined);
      void authenticate(socket, request.key).then((ok) => {
        if (!ok || this.socket || this.closed.signal.aborted) return socket.destroy();
        clearTimeout(expiry);
        server.close();
        this.watch(socket, request.idleTimeoutMs);
        this.send(socket).catch((err: unknown) => this.close(err));
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, request.host, resolve);
    });
    server.on('error', (err) => this.close(new DirectChannelUnavailableError(`the direct listener failed: ${err.message}`)));
    this.port.postMessage({ op: 'listening', id: this.id, port: (server.address() as AddressInfo).port } satisfies FromThread);
  }

  /** Every requested chunk, then the end record; the next chunk is read while this one is sealed and sent. */
  private async send(socket: Socket): Promise<void> {
    const { blob, chunkSize, chunks, key } = this.request;
    const sealer = new RecordSealer(key, 'provider');
    const file = 'path' in blob ? await open(blob.path, 'r') : undefined;
    // Two read buffers alternate: sealing copies a chunk out, so its buffer is free for the read after next.
    const buffers = file ? [Buffer.allocUnsafe(chunkSize), Buffer.allocUnsafe(chunkSize)] : [];
    const read = async (turn: number): Promise<Uint8Array> => {
      const { index, bytes } = chunks[turn];
      const offset = index * chunkSize;
      if ('shared' in blob) return blob.shared.subarray(offset, offset + bytes);
      const into = buffers[turn % 2].subarray(0, bytes);
      await readExactly(file as FileHandle, into, bytes, offset);
      return into;
    };
    let next = chunks.length > 0 ? read(0) : undefined;
    try {
      for (let turn = 0; turn < chunks.length; turn++) {
        const bytes = await (next as Promise<Uint8Array>);
        this.closed.signal.throwIfAborted();
        next = turn + 1 < chunks.length ? read(turn + 1) : undefined;
        write(socket, sealer.seal([indexHead(chunks[turn].index), bytes]));
        if (socket.writableLength > MAX_UNSENT_BYTES) await once(socket, 'drain', { signal: this.closed.signal });
      }
    } finally {
      // A read still running when sending failed must finish (and fail quietly) before the file closes.
      await next?.catch(() => undefined);
      await file?.close();
    }
    write(socket, sealer.seal([indexHead(END_INDEX)]));
    socket.end(() => {
      this.port.postMessage({ op: 'done', id: this.id } satisfies FromThread);
      this.close();
    });
  }
}

function indexHead(index: number): Buffer {
  const head = Buffer.alloc(INDEX_BYTES);
  head.writeUInt32BE(index, 0);
  return head;
}

/** Corked: a record's pieces leave in one writev, not one syscall each. */
function write(socket: Socket, buffers: Buffer[]): void {
  socket.cork();
  for (const buffer of buffers) socket.write(buffer);
  socket.uncork();
}

class FetcherSession extends Session {
  private readonly expected: Map<number, ExpectedChunk>;
  private readonly writes = new Set<Promise<void>>();
  private file: FileHandle | undefined;
  private writeFailure: unknown;
  /** The end record came. */
  private ended = false;

  constructor(
    id: number,
    port: MessagePort,
    sessions: Map<number, Session>,
    private readonly request: Extract<ToThread, { op: 'fetch' }>,
  ) {
    super(id, port, sessions);
    this.expected = new Map(request.chunks.map((chunk) => [chunk.index, chunk]));
  }

  async run(): Promise<void> {
    const { request } = this;
    const maxChunkBytes = Math.max(0, ...request.chunks.map((chunk) => chunk.bytes));
    const reader = new RecordReader(new RecordOpener(request.key, 'provider'), maxChunkBytes + INDEX_BYTES, (record) => this.onRecord(record));
    const onread: OnReadOpts = {
      buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES),
      callback: (bytes, buffer) => {
        try {
          // Opened and copied out before this returns: the buffer is read into again.
          reader.push((buffer as Buffer).subarray(0, bytes));
        } catch (err) {
          this.close(err);
        }
        return !this.closed.signal.aborted;
      },
    };
    const file = await open(request.path, 'r+');
    // Closed while the file opened: the session's end was reported without it, and nothing was written.
    if (this.closed.signal.aborted) return void (await file.close());
    this.file = file;
    const socket = await connectWithin(request.host, request.port, request.connectTimeoutMs, this.closed.signal, onread);
    if (this.closed.signal.aborted) return void socket.destroy();
    this.watch(socket, request.idleTimeoutMs);
    socket.on('end', () => {
      try {
        reader.end();
        if (!this.ended) throw new UnexpectedEndOfStreamError('the direct connection ended before the session did');
      } catch (err) {
        this.close(err);
      }
    });
    for (const buffer of new RecordSealer(request.key, 'fetcher').seal([HELLO])) socket.write(buffer);
  }

  /** One authenticated record: a chunk to check and write, or the end of the session. */
  private onRecord(record: Buffer[]): void {
    if (this.ended) throw new SealedRecordError('a record after the end record');
    const split = splitHead(record, INDEX_BYTES);
    if (!split) throw new SealedRecordError('a record without a chunk index');
    const index = split.head.readUInt32BE(0);
    if (index === END_INDEX) {
      this.ended = true;
      this.close();
      return;
    }
    if (crashCountdown !== undefined && crashCountdown-- === 0) process.exit(1);
    const expected = this.expected.get(index);
    if (!expected) throw new ChunkHashMismatchError(`chunk ${index} was not requested`);
    this.expected.delete(index);
    if (!isExpectedChunk(split.rest, expected)) {
      this.port.postMessage({ op: 'chunk', id: this.id, index, matched: false } satisfies FromThread);
      return;
    }
    const write = writeAll(this.file as FileHandle, split.rest, index * this.request.chunkSize).then(
      () => {
        this.writes.delete(write);
        // Written, even if the session has ended meanwhile: the main thread hears it before the session's end.
        this.port.postMessage({ op: 'chunk', id: this.id, index, matched: true } satisfies FromThread);
        if (this.writes.size < WRITES_IN_FLIGHT && !this.closed.signal.aborted) this.socket?.resume();
      },
      (err: unknown) => {
        this.writes.delete(write);
        this.writeFailure ??= err;
        this.close(err);
      },
    );
    this.writes.add(write);
    // The disk is behind: stop reading until a write is done, which holds the provider back too.
    if (this.writes.size >= WRITES_IN_FLIGHT) this.socket?.pause();
  }

  /**
   * Ends the session once: `done` if the end record came and every write succeeded, else `failed`; either only
   * after the writes are over and the file is closed, so that the main thread may close, sync or rename it then.
   */
  override close(error?: unknown): void {
    if (this.closed.signal.aborted) return;
    this.stop(error);
    void this.settle(error);
  }

  private async settle(error: unknown): Promise<void> {
    while (this.writes.size > 0) await Promise.allSettled([...this.writes]);
    let failure = error ?? this.writeFailure;
    await this.file?.close().catch((err: unknown) => void (failure ??= err));
    if (failure === undefined && !this.ended) failure = new StreamAbortedError('the session was closed');
    this.port.postMessage(failure === undefined ? ({ op: 'done', id: this.id } satisfies FromThread) : ({ op: 'failed', id: this.id, error: flatten(failure) } satisfies FromThread));
  }
}

/** The first record must be the hello sealed with the session key. */
async function authenticate(socket: Socket, key: Uint8Array): Promise<boolean> {
  try {
    const records = readRecords(socket, new RecordOpener(key, 'fetcher'), HELLO.byteLength);
    const first = await records.next();
    return !first.done && Buffer.concat(first.value).equals(HELLO);
  } catch {
    return false;
  }
}

async function connectWithin(host: string, port: number, timeoutMs: number, closed: AbortSignal, onread: OnReadOpts): Promise<Socket> {
  const socket = connect({ host, port, noDelay: true, onread });
  socket.on('error', () => undefined);
  const timer = setTimeout(() => socket.destroy(new ReadTimeoutError('connect timed out')), timeoutMs);
  const onClosed = () => socket.destroy(new StreamAbortedError('the session was closed'));
  closed.addEventListener('abort', onClosed, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('close', () => reject(new StreamAbortedError('the connection closed before it opened')));
      socket.once('error', reject);
    });
    return socket;
  } catch (err) {
    socket.destroy();
    throw new DirectChannelUnavailableError(`cannot reach ${host}:${port}: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
    closed.removeEventListener('abort', onClosed);
  }
}

function serve(port: MessagePort): void {
  const sessions = new Map<number, Session>();
  port.on('message', (message: ToThread) => {
    if (message.op === 'crash') {
      if (message.afterChunks === undefined) process.exit(1);
      crashCountdown = message.afterChunks;
      return;
    }
    const session = sessions.get(message.id);
    try {
      switch (message.op) {
        case 'listen': {
          const provider = new ProviderSession(message.id, port, sessions, message);
          sessions.set(message.id, provider);
          provider.listen().catch((err: unknown) => provider.close(new DirectChannelUnavailableError(`cannot listen: ${flatten(err).message}`)));
          return;
        }
        case 'fetch': {
          const fetcher = new FetcherSession(message.id, port, sessions, message);
          sessions.set(message.id, fetcher);
          fetcher.run().catch((err: unknown) => fetcher.close(err));
          return;
        }
        case 'close':
          return session?.close();
      }
    } catch (err) {
      session?.close(err);
    }
  });
}

if (parentPort) serve(parentPort);
