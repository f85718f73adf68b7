/**
 * The direct channel for bulk weight bytes.
 *
 * Over the libp2p weights stream (pnet + noise: private and authenticated) a provider offers a one-time TCP
 * port and a fresh session key. The fetcher connects to the provider's address as its libp2p connection
 * sees it, proves that it holds the key with a sealed hello, and receives the requested chunks as sealed
 * records (sealed-records.ts). Integrity never rests on this channel: every chunk is still checked against
 * the signed manifest. When the channel cannot be set up (NAT, firewall, a provider that offers none), the
 * fetcher gets the same chunks over the libp2p stream instead.
 *
 * The sockets and records live in one worker thread per process (direct-thread.ts says why); this module is
 * the main thread's side: it starts that thread, passes chunks through shared slots and rebuilds its errors.
 */
import { Worker } from 'node:worker_threads';
import { ReadTimeoutError, StreamAbortedError, UnexpectedEndOfStreamError } from '../../framing/errors.ts';
import { abortReasonToError } from '../../framing/frame-stream.ts';
import { MAX_DIRECT_OFFERS } from './constants.ts';
import { DirectChannelUnavailableError, DirectThreadError, SealedRecordError } from './errors.ts';
import { SESSION_KEY_BYTES, newSessionKey } from './sealed-records.ts';
import type { FlatError, FromThread, ToThread } from './direct-thread.ts';

/** What a provider answers a `direct` request with: where to connect and the session key (base64). */
export interface DirectOffer {
  port: number;
  key: string;
}

export interface DirectTimeouts {
  /** How long an offer waits for its fetcher, and a fetcher for its connection. */
  connectTimeoutMs: number;
  /** A direct connection silent this long is dropped. */
  idleTimeoutMs: number;
}

/**
 * Chunks the fetcher's thread may hand over before the main thread has hashed and written the first of them: the
 * thread decrypts while the main thread verifies and the disk writes. Each is a slot of the chunk size in the
 * session's shared buffer.
 */
const CHUNKS_IN_FLIGHT = 4;
/** Chunks the provider's main thread may hand its thread at once: one being sealed while the next is read. */
const PROVIDER_SLOTS = 2;

/** Errors the thread may end a session with, rebuilt by name; anything else keeps its name on a plain Error. */
const THREAD_ERRORS: Record<string, new (message: string) => Error> = {
  DirectChannelUnavailableError,
  ReadTimeoutError,
  SealedRecordError,
  StreamAbortedError,
  UnexpectedEndOfStreamError,
};

function rebuild(error: FlatError): Error {
  const Known = THREAD_ERRORS[error.name];
  if (Known) return new Known(error.message);
  const err = new Error(error.message);
  err.name = error.name;
  return err;
}

/** The main thread's view of one session: the thread's messages for it, and how it fails. */
interface SessionHandler {
  onMessage(message: FromThread): void;
  fail(err: Error): void;
}

/**
 * The process's direct-channel thread: started on first use, referenced only while a session is open (an idle thread
 * keeps no process alive), started again after it dies. When it dies, each open session fails with DirectThreadError.
 */
class DirectThread {
  private static current: DirectThread | undefined;
  private readonly worker: Worker;
  private readonly sessions = new Map<number, SessionHandler>();
  private nextId = 1;
  private dead = false;

  /** The running thread, or a new one; DirectThreadError when none can be started. */
  static get(): DirectThread {
    if (!DirectThread.current || DirectThread.current.dead) {
      try {
        DirectThread.current = new DirectThread();
      } catch (err) {
        throw new DirectThreadError(`cannot start the direct channel's thread: ${(err as Error).message}`);
      }
    }
    return DirectThread.current;
  }

  private constructor() {
    this.worker = new Worker(threadBootstrap(new URL('./direct-thread.ts', import.meta.url).href), { eval: true, execArgv: [] });
    this.worker.unref();
    this.worker.on('message', (message: FromThread) => this.sessions.get(message.id)?.onMessage(message));
    this.worker.on('error', (err) => this.die(`the direct channel's thread failed: ${err.message}`));
    this.worker.on('exit', (code) => this.die(`the direct channel's thread exited (${code})`));
  }

  open(handler: SessionHandler): number {
    if (this.dead) throw new DirectThreadError("the direct channel's thread is gone");
    const id = this.nextId++;
    if (this.sessions.size === 0) this.worker.ref();
    this.sessions.set(id, handler);
    return id;
  }

  /** The session is over on this side; the thread drops it too (if it has not already). */
  forget(id: number): void {
    if (!this.sessions.delete(id)) return;
    this.post({ op: 'close', id });
    if (this.sessions.size === 0) this.worker.unref();
  }

  post(message: ToThread): void {
    if (!this.dead) this.worker.postMessage(message);
  }

  /** Tests only: the thread dies as a crash would. */
  crashForTest(): void {
    this.post({ op: 'crash' });
  }

  private die(reason: string): void {
    if (this.dead) return;
    this.dead = true;
    const open = [...this.sessions.values()];
    this.sessions.clear();
    for (const session of open) session.fail(new DirectThreadError(reason));
  }
}

/** Tests only: make the direct channel's thread die as a crash would (open sessions fail, the next one starts anew). */
export function crashDirectThreadForTest(): void {
  DirectThread.get().crashForTest();
}

/**
 * The thread's first code: register tsx's loader, then import the .ts entry (on Node 20, `execArgv: ['--import',
 * 'tsx']` does not reach a worker's entry module; worker/node/engine-client.ts does the same).
 */
function threadBootstrap(entry: string): string {
  return `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
}

/** A provider whose thread is gone offers no direct channel: the fetcher that asked then uses the libp2p stream. */
function withoutThread(err: unknown): unknown {
  return err instanceof DirectThreadError ? new DirectChannelUnavailableError(err.message) : err;
}

/** A one-shot wait that a session's failure also ends. */
function waiter<T>(): PromiseWithResolvers<T> {
  const waiting = Promise.withResolvers<T>();
  waiting.promise.catch(() => undefined);
  return waiting;
}

/** Provider side of a session: sends chunks as sealed records (sealed in the thread). */
export class DirectChunkWriter {
  private readonly freeSlots: number[] = Array.from({ length: PROVIDER_SLOTS }, (_, slot) => slot);
  private slotFreed = waiter<void>();
  private ended = waiter<void>();
  private failure: Error | undefined;

  constructor(
    private readonly thread: DirectThread,
    private readonly id: number,
    private readonly slots: Uint8Array,
    private readonly slotBytes: number,
  ) {}

  /** Sends one chunk; `bytes` are copied before it resolves, so the caller may reuse them then. */
  async chunk(index: number, bytes: Uint8Array): Promise<void> {
    while (this.freeSlots.length === 0) {
      this.throwIfFailed();
      await this.slotFreed.promise;
    }
    this.throwIfFailed();
    if (bytes.byteLength > this.slotBytes) throw new RangeError(`chunk ${index} is larger than the session's slots`);
    const slot = this.freeSlots.shift() as number;
    this.slots.set(bytes, slot * this.slotBytes);
    this.thread.post({ op: 'send', id: this.id, slot, index, bytes: bytes.byteLength });
  }

  async end(): Promise<void> {
    this.throwIfFailed();
    this.thread.post({ op: 'end', id: this.id });
    await this.ended.promise;
  }

  /** @internal The thread freed a slot. */
  slotSent(slot: number): void {
    this.freeSlots.push(slot);
    const freed = this.slotFreed;
    this.slotFreed = waiter<void>();
    freed.resolve();
  }

  /** @internal The thread sent the end record. */
  done(): void {
    this.ended.resolve();
  }

  /** @internal The session failed: every wait ends with `err`. */
  fail(err: Error): void {
    this.failure ??= err;
    this.slotFreed.reject(err);
    this.ended.reject(err);
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }
}

/**
 * The provider's one-time listeners. `offer` opens one; the first connection that proves the key gets the
 * session, which `send` fills; then the listener closes (it also closes unused after connectTimeoutMs).
 */
export class DirectOffers {
  /** Open sessions (listening or sending), by thread session id. */
  private readonly open = new Map<number, DirectThread>();

  constructor(
    private readonly timeouts: DirectTimeouts,
    /** Address the listeners bind to; default every interface (the fetcher uses the address it already reaches us at). */
    private readonly host?: string,
  ) {}

  /** `chunkBytes`: the largest chunk `send` will pass (the size of the session's slots). */
  async offer(chunkBytes: number, send: (writer: DirectChunkWriter) => Promise<void>): Promise<DirectOffer> {
    if (this.open.size >= MAX_DIRECT_OFFERS) throw new DirectChannelUnavailableError('too many direct channels open');
    try {
      return await this.listen(DirectThread.get(), chunkBytes, send);
    } catch (err) {
      throw withoutThread(err);
    }
  }

  closeAll(): void {
    for (const id of [...this.open.keys()]) this.finish(id);
  }

  private async listen(thread: DirectThread, chunkBytes: number, send: (writer: DirectChunkWriter) => Promise<void>): Promise<DirectOffer> {
    const key = newSessionKey();
    const shared = new SharedArrayBuffer(PROVIDER_SLOTS * chunkBytes);
    const listening = waiter<number>();
    let writer: DirectChunkWriter | undefined;
    const id = thread.open({
      onMessage: (message) => {
        if (message.op === 'listening') listening.resolve(message.port);
        else if (message.op === 'accepted') {
          writer = new DirectChunkWriter(thread, id, new Uint8Array(shared), chunkBytes);
          const current = writer;
          send(current).then(
            () => this.finish(id),
            (err: Error) => {
              current.fail(err);
              this.finish(id);
            },
          );
        } else if (message.op === 'sent') writer?.slotSent(message.slot);
        else if (message.op === 'done') writer?.done();
        else if (message.op === 'expired') this.finish(id);
        else if (message.op === 'failed') fail(rebuild(message.error));
      },
      fail: (err) => fail(err),
    });
    const fail = (err: Error) => {
      listening.reject(err);
      writer?.fail(err);
      this.finish(id);
    };
    this.open.set(id, thread);
    thread.post({ op: 'listen', id, key, host: this.host, slots: shared, slotBytes: chunkBytes, ...this.timeouts });
    try {
      return { port: await listening.promise, key: key.toString('base64') };
    } catch (err) {
      this.finish(id);
      throw err;
    }
  }

  private finish(id: number): void {
    this.open.get(id)?.forget(id);
    this.open.delete(id);
  }
}

export interface ReceiveDirectOptions extends DirectTimeouts {
  host: string;
  offer: DirectOffer;
  maxChunkBytes: number;
  signal?: AbortSignal;
  /** A chunk's bytes, valid until the returned promise settles. */
  onChunk: (index: number, pieces: Uint8Array[]) => Promise<void>;
}

/**
 * Fetcher side: connect, say hello, hand every received chunk to `onChunk` (up to CHUNKS_IN_FLIGHT at a
 * time) until the provider ends the session. DirectChannelUnavailableError when no connection could be made
 * (nothing was received then); DirectThreadError when the thread died.
 */
export async function receiveDirect(options: ReceiveDirectOptions): Promise<void> {
  const key = Buffer.from(options.offer.key, 'base64');
  if (key.byteLength !== SESSION_KEY_BYTES) throw new SealedRecordError('the offered session key has the wrong size');
  options.signal?.throwIfAborted();
  const thread = DirectThread.get();
  const shared = new SharedArrayBuffer(CHUNKS_IN_FLIGHT * options.maxChunkBytes);
  const inFlight = new Set<Promise<void>>();
  const outcome = waiter<void>();
  let over = false;
  let chunkFailure: Error | undefined;
  const end = (err?: Error) => {
    if (over) return;
    over = true;
    if (err) outcome.reject(err);
    else outcome.resolve();
  };
  const id = thread.open({
    onMessage: (message) => {
      if (over) return;
      if (message.op === 'chunk') {
        const bytes = new Uint8Array(shared, message.slot * options.maxChunkBytes, message.bytes);
        const handled: Promise<void> = options.onChunk(message.index, [bytes]).then(
          () => {
            inFlight.delete(handled);
            thread.post({ op: 'release', id, slot: message.slot });
          },
          (err: Error) => {
            inFlight.delete(handled);
            chunkFailure ??= err;
            end(err);
          },
        );
        inFlight.add(handled);
      } else if (message.op === 'done') end();
      else if (message.op === 'failed') end(rebuild(message.error));
    },
    fail: (err) => end(err),
  });
  const onAbort = () => end(abortReasonToError(options.signal?.reason));
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const { connectTimeoutMs, idleTimeoutMs, maxChunkBytes, host } = options;
    thread.post({ op: 'fetch', id, host, port: options.offer.port, key, slots: shared, maxChunkBytes, connectTimeoutMs, idleTimeoutMs });
    await outcome.promise;
    // Every chunk handed over is written before the session counts as done.
    await Promise.allSettled(inFlight);
    if (chunkFailure) throw chunkFailure;
  } finally {
    // Whatever happens, `onChunk` calls still running finish before the caller moves on.
    await Promise.allSettled(inFlight);
    options.signal?.removeEventListener('abort', onAbort);
    thread.forget(id);
  }
}
