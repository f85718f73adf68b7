/**
 * The direct channel's data plane, run in a worker thread of its own (direct.ts starts it): the sockets and the
 * sealed records (AES-GCM both ways).
 *
 * Why a thread: at a gigabyte a second the records' buffers churn the heap that holds them. In the peer's main
 * isolate (tens of MB of libp2p state) that churn cost a mark-compact every ~50 ms once V8's memory reducer had
 * switched the heap to slow growth, which it does after any idle spell (measured: 440 → 230 MB/s). This isolate's
 * heap is small, so the same collections cost little. Chunk bytes cross between the threads through shared slots,
 * so the main thread allocates no buffer per chunk. The main thread keeps the control plane (offers, manifests,
 * errors) and the file side: reads on the provider; on the fetcher each chunk's sha256 against the manifest and the
 * write, which overlap the next chunk's decryption here.
 */
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { parentPort } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';
import { ReadTimeoutError, StreamAbortedError, UnexpectedEndOfStreamError } from '../../framing/errors.ts';
import { DirectChannelUnavailableError, SealedRecordError } from './errors.ts';
import { RecordOpener, RecordSealer, readRecords, splitHead } from './sealed-records.ts';

/** A session's error, flattened to cross the thread boundary (rebuilt by name on the other side). */
export interface FlatError {
  name: string;
  message: string;
}

export interface SessionTimeouts {
  connectTimeoutMs: number;
  idleTimeoutMs: number;
}

/** Main thread → this thread. Each message names its session by `id`. */
export type ToThread =
  /** Provider: open a one-time listener; chunks go out of `slots` (each `slotBytes` long). */
  | ({ op: 'listen'; id: number; key: Uint8Array; host?: string; slots: SharedArrayBuffer; slotBytes: number } & SessionTimeouts)
  /** Provider: seal and send the chunk `bytes` long in `slot`; answered by `sent` once the slot is free. */
  | { op: 'send'; id: number; slot: number; index: number; bytes: number }
  /** Provider: send the end record and close; answered by `done`. */
  | { op: 'end'; id: number }
  /** Fetcher: connect, say hello and receive chunks into `slots` (`maxChunkBytes` each). */
  | ({ op: 'fetch'; id: number; host: string; port: number; key: Uint8Array; slots: SharedArrayBuffer; maxChunkBytes: number } & SessionTimeouts)
  /** Fetcher: the main thread is done with a slot. */
  | { op: 'release'; id: number; slot: number }
  /** Either side: drop the session (a cancelled fetch, a provider that failed, a closing peer). */
  | { op: 'close'; id: number; error?: FlatError }
  /** Tests only: this thread dies at once, as a crash would. */
  | { op: 'crash' };

/** This thread → main thread. */
export type FromThread =
  | { op: 'listening'; id: number; port: number }
  /** Provider: a fetcher proved the key; the main thread may send. */
  | { op: 'accepted'; id: number }
  | { op: 'sent'; id: number; slot: number }
  /** Fetcher: an authenticated chunk in `slot`. */
  | { op: 'chunk'; id: number; index: number; slot: number; bytes: number }
  /** The session ended well (provider: all sent; fetcher: the end record came). */
  | { op: 'done'; id: number }
  /** Provider: the listener closed unused (no fetcher proved the key in time). */
  | { op: 'expired'; id: number }
  | { op: 'failed'; id: number; error: FlatError };

const HELLO = new TextEncoder().encode('agentjet-weights-direct-hello-v1');
/** Chunk index of the record that ends a session. */
const END_INDEX = 0xffffffff;
const INDEX_BYTES = 4;
/**
 * Sealed bytes queued on the socket before the provider holds a slot back until the socket drains. The socket's own
 * mark (16 KiB) would make it wait after every chunk: it then seals the next chunk while the fetcher waits, and waits
 * while the fetcher verifies. A few chunks' worth keeps both busy, and bounds what one session holds.
 */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;

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
    this.closed.abort(error);
    this.sessions.delete(this.id);
    this.socket?.destroy();
    if (error !== undefined) this.port.postMessage({ op: 'failed', id: this.id, error: flatten(error) } satisfies FromThread);
  }

  /** The session's socket; a fetcher learns of its end from the records it reads, a provider from `close`. */
  protected watch(socket: Socket, idleTimeoutMs: number, onClose: boolean): void {
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setTimeout(idleTimeoutMs, () => this.close(new ReadTimeoutError('the direct connection went silent')));
    socket.on('error', () => undefined);
    if (onClose) socket.on('close', () => this.close(new StreamAbortedError('the direct connection closed')));
  }
}

class ProviderSession extends Session {
  private readonly server: Server = createServer();
  private sealer: RecordSealer | undefined;
  private unsent: Array<() => void> = [];

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
        this.watch(socket, request.idleTimeoutMs, true);
        socket.on('drain', () => this.drained());
        this.sealer = new RecordSealer(request.key, 'provider');
        this.port.postMessage({ op: 'accepted', id: this.id } satisfies FromThread);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, request.host, resolve);
    });
    server.on('error', (err) => this.close(new DirectChannelUnavailableError(`the direct listener failed: ${err.message}`)));
    this.port.postMessage({ op: 'listening', id: this.id, port: (server.address() as AddressInfo).port } satisfies FromThread);
  }

  send(message: Extract<ToThread, { op: 'send' }>): void {
    const head = Buffer.alloc(INDEX_BYTES);
    head.writeUInt32BE(message.index, 0);
    // Sealing copies the bytes: the slot is free once the socket has room for more.
    const view = new Uint8Array(this.request.slots, message.slot * this.request.slotBytes, message.bytes);
    this.write(this.sealOrThrow().seal([head, view]));
    const sent = () => this.port.postMessage({ op: 'sent', id: this.id, slot: message.slot } satisfies FromThread);
    if ((this.socket?.writableLength ?? 0) > MAX_UNSENT_BYTES) this.unsent.push(sent);
    else sent();
  }

  end(): void {
    const head = Buffer.alloc(INDEX_BYTES);
    head.writeUInt32BE(END_INDEX, 0);
    this.write(this.sealOrThrow().seal([head]));
    this.socket?.end(() => {
      this.port.postMessage({ op: 'done', id: this.id } satisfies FromThread);
      this.close();
    });
  }

  private sealOrThrow(): RecordSealer {
    if (!this.sealer || this.closed.signal.aborted) throw new StreamAbortedError('the direct connection is closed');
    return this.sealer;
  }

  private write(buffers: Buffer[]): void {
    const socket = this.socket as Socket;
    // Corked: the record's pieces leave in one writev, not one syscall each.
    socket.cork();
    for (const buffer of buffers) socket.write(buffer);
    socket.uncork();
  }

  private drained(): void {
    const waiting = this.unsent;
    this.unsent = [];
    for (const sent of waiting) sent();
  }
}

class FetcherSession extends Session {
  private readonly freeSlots: number[];
  private slotFreed: (() => void) | undefined;

  constructor(
    id: number,
    port: MessagePort,
    sessions: Map<number, Session>,
    private readonly request: Extract<ToThread, { op: 'fetch' }>,
  ) {
    super(id, port, sessions);
    const count = Math.floor(request.slots.byteLength / request.maxChunkBytes);
    this.freeSlots = Array.from({ length: count }, (_, slot) => slot);
  }

  release(slot: number): void {
    this.freeSlots.push(slot);
    this.slotFreed?.();
  }

  override close(error?: unknown): void {
    super.close(error);
    this.slotFreed?.(); // a wait for a slot ends with the session
  }

  async run(): Promise<void> {
    const { request } = this;
    const socket = await connectWithin(request.host, request.port, request.connectTimeoutMs, this.closed.signal);
    this.watch(socket, request.idleTimeoutMs, false);
    for (const buffer of new RecordSealer(request.key, 'fetcher').seal([HELLO])) socket.write(buffer);
    const opener = new RecordOpener(request.key, 'provider');
    for await (const record of readRecords(socket, opener, request.maxChunkBytes + INDEX_BYTES)) {
      const split = splitHead(record, INDEX_BYTES);
      if (!split) throw new SealedRecordError('a record without a chunk index');
      const index = split.head.readUInt32BE(0);
      if (index === END_INDEX) {
        this.port.postMessage({ op: 'done', id: this.id } satisfies FromThread);
        this.close();
        return;
      }
      // No free slot: the main thread still writes earlier chunks; not reading meanwhile holds the provider back.
      const slot = await this.freeSlot();
      const into = new Uint8Array(request.slots, slot * request.maxChunkBytes, request.maxChunkBytes);
      let bytes = 0;
      for (const piece of split.rest) {
        into.set(piece, bytes);
        bytes += piece.byteLength;
      }
      this.port.postMessage({ op: 'chunk', id: this.id, index, slot, bytes } satisfies FromThread);
    }
    if (!this.closed.signal.aborted) throw new UnexpectedEndOfStreamError('the direct connection ended before the session did');
  }

  private async freeSlot(): Promise<number> {
    while (this.freeSlots.length === 0) {
      this.closed.signal.throwIfAborted();
      await new Promise<void>((resolve) => (this.slotFreed = resolve));
      this.slotFreed = undefined;
    }
    this.closed.signal.throwIfAborted();
    return this.freeSlots.shift() as number;
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

async function connectWithin(host: string, port: number, timeoutMs: number, closed: AbortSignal): Promise<Socket> {
  const socket = connect({ host, port, noDelay: true });
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
    if (message.op === 'crash') process.exit(1);
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
        case 'send':
          return (session as ProviderSession | undefined)?.send(message);
        case 'end':
          return (session as ProviderSession | undefined)?.end();
        case 'release':
          return (session as FetcherSession | undefined)?.release(message.slot);
        case 'close':
          return session?.close();
      }
    } catch (err) {
      session?.close(err);
    }
  });
}

if (parentPort) serve(parentPort);
