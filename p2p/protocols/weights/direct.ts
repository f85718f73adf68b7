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
 * the main thread's side: it starts that thread, tells a provider's session which chunks of which blob to send and a
 * fetcher's session what each chunk must hash to and where to write it, and rebuilds the thread's errors.
 */
import { Worker } from 'node:worker_threads';
import { ReadTimeoutError, StreamAbortedError, UnexpectedEndOfStreamError } from '../../framing/errors.ts';
import { abortReasonToError } from '../../framing/frame-stream.ts';
import { MAX_DIRECT_OFFERS } from './constants.ts';
import type { ChunkTarget } from './download.ts';
import { ChunkHashMismatchError, DirectChannelUnavailableError, DirectThreadError, SealedRecordError } from './errors.ts';
import { SESSION_KEY_BYTES, newSessionKey } from './sealed-records.ts';
import type { ChunkToSend, FlatError, FromThread, ThreadBlob, ToThread } from './direct-thread.ts';

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

/** Errors the thread may end a session with, rebuilt by name; anything else keeps its name on a plain Error. */
const THREAD_ERRORS: Record<string, new (message: string) => Error> = {
  ChunkHashMismatchError,
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

  /** The thread ends the session (if it has not already): a fetcher's then reports its end, once its writes are over. */
  close(id: number): void {
    this.post({ op: 'close', id });
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

  /** Tests only: the thread dies as a crash would, at once or after `afterChunks` more fetched chunks. */
  crashForTest(afterChunks?: number): void {
    this.post({ op: 'crash', afterChunks });
  }

  private die(reason: string): void {
    if (this.dead) return;
    this.dead = true;
    const open = [...this.sessions.values()];
    this.sessions.clear();
    for (const session of open) session.fail(new DirectThreadError(reason));
  }
}

/**
 * Tests only: make the direct channel's thread die as a crash would (open sessions fail, the next one starts anew):
 * at once, or when its fetch sessions have opened `afterChunks` more chunks.
 */
export function crashDirectThreadForTest(afterChunks?: number): void {
  DirectThread.get().crashForTest(afterChunks);
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

/**
 * The provider's one-time listeners. `offer` opens one; the first connection that proves the key gets the offered
 * chunks, which the thread reads and seals by itself; then the listener closes (it also closes unused after
 * connectTimeoutMs).
 */
export class DirectOffers {
  /** Open sessions (listening or sending), by thread session id. */
  private readonly open = new Map<number, DirectThread>();

  constructor(
    private readonly timeouts: DirectTimeouts,
    /** Address the listeners bind to; default every interface (the fetcher uses the address it already reaches us at). */
    private readonly host?: string,
  ) {}

  /**
   * Offers `chunks` of `blob` (each at its index times `chunkSize`). A blob's bytes must be a view of a
   * SharedArrayBuffer: the thread seals straight from them.
   */
  async offer(blob: ThreadBlob, chunkSize: number, chunks: ChunkToSend[]): Promise<DirectOffer> {
    if (this.open.size >= MAX_DIRECT_OFFERS) throw new DirectChannelUnavailableError('too many direct channels open');
    if ('shared' in blob && !(blob.shared.buffer instanceof SharedArrayBuffer)) throw new TypeError("the blob's bytes are not in shared memory");
    try {
      return await this.listen(DirectThread.get(), blob, chunkSize, chunks);
    } catch (err) {
      throw withoutThread(err);
    }
  }

  closeAll(): void {
    for (const id of [...this.open.keys()]) this.finish(id);
  }

  private async listen(thread: DirectThread, blob: ThreadBlob, chunkSize: number, chunks: ChunkToSend[]): Promise<DirectOffer> {
    const key = newSessionKey();
    const listening = waiter<number>();
    const id = thread.open({
      onMessage: (message) => {
        if (message.op === 'listening') listening.resolve(message.port);
        else if (message.op === 'failed') fail(rebuild(message.error));
        // Sent or unused: the session is over (the fetcher learns how from its own end of the connection).
        else if (message.op === 'done' || message.op === 'expired') this.finish(id);
      },
      fail: (err) => fail(err),
    });
    const fail = (err: Error) => {
      listening.reject(err);
      this.finish(id);
    };
    this.open.set(id, thread);
    thread.post({ op: 'listen', id, key, host: this.host, blob, chunkSize, chunks, ...this.timeouts });
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
  /** The partial file the chunks go into, and what each must hash to. */
  target: ChunkTarget;
  /** The chunks the provider was asked for: the thread accepts no others. */
  indices: number[];
  signal?: AbortSignal;
  /** A chunk came: `matched` when it hashed right and is written to the target, else it is not written. */
  onChunk: (index: number, matched: boolean) => void;
}

/**
 * Fetcher side: connect, say hello, and let the thread check and write every chunk that comes until the provider
 * ends the session; `onChunk` hears of each. Returns or throws only once the thread's writes for the session are
 * over (or the thread has died), so the caller may close, sync or rename the file then. DirectChannelUnavailableError when no connection
 * could be made (nothing was received then); DirectThreadError when the thread died; ChunkHashMismatchError when
 * the provider sent a chunk that was not asked for.
 */
export async function receiveDirect(options: ReceiveDirectOptions): Promise<void> {
  const key = Buffer.from(options.offer.key, 'base64');
  if (key.byteLength !== SESSION_KEY_BYTES) throw new SealedRecordError('the offered session key has the wrong size');
  options.signal?.throwIfAborted();
  const { target, indices } = options;
  const chunks = indices.map((index) => {
    const chunk = target.chunks[index];
    if (!chunk) throw new RangeError(`the target has no chunk ${index}`);
    return { index, bytes: chunk.bytes, sha256: chunk.sha256 };
  });
  const thread = DirectThread.get();
  /** The session's end as the thread reports it (after its writes), or the thread's death. */
  const over = waiter<void>();
  let failure: Error | undefined;
  const id = thread.open({
    onMessage: (message) => {
      if (message.op === 'chunk') {
        try {
          options.onChunk(message.index, message.matched);
        } catch (err) {
          failure ??= err as Error;
          thread.close(id);
        }
      } else if (message.op === 'done') over.resolve();
      else if (message.op === 'failed') {
        failure ??= rebuild(message.error);
        over.resolve();
      }
    },
    fail: (err) => {
      failure ??= err;
      over.resolve();
    },
  });
  const onAbort = () => {
    failure ??= abortReasonToError(options.signal?.reason);
    thread.close(id);
  };
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const { connectTimeoutMs, idleTimeoutMs, host } = options;
    thread.post({ op: 'fetch', id, host, port: options.offer.port, key, path: target.path, chunkSize: target.chunkSize, chunks, connectTimeoutMs, idleTimeoutMs });
    await over.promise;
    if (failure) throw failure;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    thread.forget(id);
  }
}
