/**
 * The direct channel for bulk weight bytes.
 *
 * Over the libp2p weights stream (pnet + noise: private and authenticated) a provider offers a one-time TCP
 * port and a fresh session key. The fetcher connects to the provider's address as its libp2p connection
 * sees it, proves that it holds the key with a sealed hello, and receives the requested chunks as sealed
 * records (sealed-records.ts). Integrity never rests on this channel: every chunk is still checked against
 * the signed manifest. When the channel cannot be set up (NAT, firewall, a provider that offers none), the
 * fetcher gets the same chunks over the libp2p stream instead.
 */
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { ReadTimeoutError, StreamAbortedError, UnexpectedEndOfStreamError } from '../../framing/errors.ts';
import { abortReasonToError } from '../../framing/frame-stream.ts';
import { MAX_DIRECT_OFFERS } from './constants.ts';
import { DirectChannelUnavailableError, SealedRecordError } from './errors.ts';
import { RecordOpener, RecordSealer, SESSION_KEY_BYTES, newSessionKey, readRecords, splitHead } from './sealed-records.ts';

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

const HELLO = Buffer.from('agentjet-weights-direct-hello-v1');
/** Chunk index of the record that ends a session. */
const END_INDEX = 0xffffffff;
const INDEX_BYTES = 4;
/**
 * Sealed bytes queued on the socket before the provider waits for it to drain. The socket's own mark (16 KiB) would
 * make it wait after every chunk: it then seals the next chunk while the fetcher waits, and waits while the fetcher
 * verifies. A few chunks' worth keeps both busy, and bounds what one session holds to this plus one record.
 */
const MAX_UNSENT_BYTES = 4 * 1024 * 1024;
/** Chunks handed to `onChunk` and not yet done (written to disk) while the next ones are read: overlaps disk and network. */
const CHUNKS_IN_FLIGHT = 4;

/** Provider side of a session: sends chunks as sealed records. */
export class DirectChunkWriter {
  constructor(
    private readonly socket: Socket,
    private readonly sealer: RecordSealer,
  ) {}

  /** Sends one chunk; `bytes` are sealed (copied) before anything is awaited, so the caller may reuse them. */
  async chunk(index: number, bytes: Uint8Array): Promise<void> {
    const head = Buffer.alloc(INDEX_BYTES);
    head.writeUInt32BE(index, 0);
    await this.write(this.sealer.seal([head, bytes]));
  }

  async end(): Promise<void> {
    const head = Buffer.alloc(INDEX_BYTES);
    head.writeUInt32BE(END_INDEX, 0);
    await this.write(this.sealer.seal([head]));
    await new Promise<void>((resolve) => this.socket.end(resolve));
  }

  private async write(buffers: Buffer[]): Promise<void> {
    if (this.socket.destroyed) throw new StreamAbortedError('the direct connection is closed');
    // Corked: the record's pieces leave in one writev, not one syscall each.
    this.socket.cork();
    for (const buffer of buffers) this.socket.write(buffer);
    this.socket.uncork();
    if (this.socket.writableLength > MAX_UNSENT_BYTES) await untilEventOrClose(this.socket, 'drain');
  }
}

/**
 * The provider's one-time listeners. `offer` opens one; the first connection that proves the key gets the
 * session, which `send` fills; then the listener closes (it also closes unused after connectTimeoutMs).
 */
export class DirectOffers {
  private readonly servers = new Set<Server>();
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly timeouts: DirectTimeouts,
    /** Address the listeners bind to; default every interface (the fetcher uses the address it already reaches us at). */
    private readonly host?: string,
  ) {}

  async offer(send: (writer: DirectChunkWriter) => Promise<void>): Promise<DirectOffer> {
    if (this.servers.size + this.sockets.size >= MAX_DIRECT_OFFERS) throw new DirectChannelUnavailableError('too many direct channels open');
    const key = newSessionKey();
    const server = createServer();
    this.servers.add(server);
    let accepted = false;
    const closeServer = () => {
      clearTimeout(expiry);
      this.servers.delete(server);
      server.close();
    };
    const expiry = setTimeout(closeServer, this.timeouts.connectTimeoutMs);
    server.on('connection', (socket) => {
      if (accepted) return socket.destroy();
      this.track(socket);
      void this.authenticate(socket, key).then((ok) => {
        if (!ok || accepted) return socket.destroy();
        accepted = true;
        closeServer();
        const writer = new DirectChunkWriter(socket, new RecordSealer(key, 'provider'));
        return send(writer).catch((err: Error) => socket.destroy(err));
      });
    });
    server.on('error', closeServer);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, this.host, resolve);
    });
    return { port: (server.address() as AddressInfo).port, key: key.toString('base64') };
  }

  closeAll(): void {
    for (const server of this.servers) server.close();
    for (const socket of this.sockets) socket.destroy();
    this.servers.clear();
    this.sockets.clear();
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    // Errors surface where the socket is used; an unheard 'error' event would crash the process.
    socket.on('error', () => undefined);
    socket.setNoDelay(true);
    socket.setTimeout(this.timeouts.idleTimeoutMs, () => socket.destroy(new ReadTimeoutError('the direct connection went silent')));
  }

  /** The first record must be the hello sealed with the session key. */
  private async authenticate(socket: Socket, key: Buffer): Promise<boolean> {
    try {
      const records = readRecords(socket, new RecordOpener(key, 'fetcher'), HELLO.byteLength);
      const first = await records.next();
      return !first.done && Buffer.concat(first.value).equals(HELLO);
    } catch {
      return false;
    }
  }
}

export interface ReceiveDirectOptions extends DirectTimeouts {
  host: string;
  offer: DirectOffer;
  maxChunkBytes: number;
  signal?: AbortSignal;
  /** A chunk's bytes as pieces in order (as they came off the wire, not reassembled). */
  onChunk: (index: number, pieces: Buffer[]) => Promise<void>;
}

/**
 * Fetcher side: connect, say hello, hand every received chunk to `onChunk` (up to CHUNKS_IN_FLIGHT at a
 * time) until the provider ends the session. DirectChannelUnavailableError when no connection could be made
 * (nothing was received then).
 */
export async function receiveDirect(options: ReceiveDirectOptions): Promise<void> {
  const key = Buffer.from(options.offer.key, 'base64');
  if (key.byteLength !== SESSION_KEY_BYTES) throw new SealedRecordError('the offered session key has the wrong size');
  const socket = await connectWithin(options.host, options.offer.port, options);
  const onAbort = () => socket.destroy(abortReasonToError(options.signal?.reason));
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  const settle = async () => {
    if (failure === undefined && inFlight.size > 0) await Promise.race(inFlight);
    if (failure !== undefined) throw failure;
  };
  try {
    socket.setTimeout(options.idleTimeoutMs, () => socket.destroy(new ReadTimeoutError('the direct connection went silent')));
    for (const buffer of new RecordSealer(key, 'fetcher').seal([HELLO])) socket.write(buffer);
    for await (const record of readRecords(socket, new RecordOpener(key, 'provider'), options.maxChunkBytes + INDEX_BYTES)) {
      const split = splitHead(record, INDEX_BYTES);
      if (!split) throw new SealedRecordError('a record without a chunk index');
      const index = split.head.readUInt32BE(0);
      if (index === END_INDEX) {
        while (inFlight.size > 0) await settle();
        return;
      }
      const handled: Promise<void> = options.onChunk(index, split.rest).then(
        () => void inFlight.delete(handled),
        (err: unknown) => {
          inFlight.delete(handled);
          failure ??= err;
        },
      );
      inFlight.add(handled);
      while (inFlight.size >= CHUNKS_IN_FLIGHT || failure !== undefined) await settle();
    }
    throw new UnexpectedEndOfStreamError('the direct connection ended before the session did');
  } finally {
    // Whatever happens, `onChunk` calls still running finish before the caller moves on.
    await Promise.allSettled(inFlight);
    options.signal?.removeEventListener('abort', onAbort);
    socket.destroy();
  }
}

/** Resolves on `event`; rejects when the socket closes (or errors) first. */
function untilEventOrClose(socket: Socket, event: 'drain' | 'connect'): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onEvent = () => {
      socket.off('close', onClose);
      resolve();
    };
    const onClose = () => {
      socket.off(event, onEvent);
      reject(new StreamAbortedError('the direct connection closed'));
    };
    socket.once(event, onEvent);
    socket.once('close', onClose);
  });
}

async function connectWithin(host: string, port: number, options: DirectTimeouts & { signal?: AbortSignal }): Promise<Socket> {
  options.signal?.throwIfAborted();
  const socket = connect({ host, port, noDelay: true });
  socket.on('error', () => undefined);
  const timer = setTimeout(() => socket.destroy(new ReadTimeoutError('connect timed out')), options.connectTimeoutMs);
  try {
    await untilEventOrClose(socket, 'connect');
    return socket;
  } catch (err) {
    socket.destroy();
    throw new DirectChannelUnavailableError(`cannot reach ${host}:${port}: ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}
