/**
 * The exchange shared by infer, episode and trajectories: the client sends one request frame
 * `{v, body}`, the server answers with a stream of frames `{t:'data', d}` closed by `{t:'end'}` or by an
 * error frame `{t:'error', name, message}`. Either side aborting the stream cancels the other.
 */
import type { Connection, Libp2p, PeerId, Stream } from '@libp2p/interface';
import { z } from 'zod';
import { FrameStream, sendErrorFrame } from '../../framing/frame-stream.ts';
import { FrameTooLargeError, InvalidFrameError, RemoteError, StreamAbortedError } from '../../framing/errors.ts';
import { InvalidRequestError, ResponseTooLargeError, UnsupportedVersionError } from './errors.ts';
import type { ViolationTracker } from './violations.ts';

export const RequestEnvelope = z.object({ v: z.number().int(), body: z.unknown() });

export const ResponseFrame = z.discriminatedUnion('t', [
  z.object({ t: z.literal('data'), d: z.unknown() }),
  z.object({ t: z.literal('end') }),
  z.object({ t: z.literal('error'), name: z.string().max(200), message: z.string().max(4_000) }),
]);

export interface JsonStreamLimits {
  /** Protocol version carried in the request envelope. */
  version: number;
  maxRequestBytes: number;
  maxResponseFrameBytes: number;
  /** Deadline for each single read (the request on the server, each response frame on the client). */
  readTimeoutMs: number;
}

export interface HandlerContext {
  /** The remote peer that sent the request. */
  peerId: string;
  /** Aborted when the client cancels or the connection drops. */
  signal: AbortSignal;
}

export type Emit = (data: unknown) => Promise<void>;

/** Errors that mean the remote peer sent something no honest peer sends. */
export function isProtocolViolation(err: unknown): boolean {
  return (
    err instanceof InvalidFrameError ||
    err instanceof FrameTooLargeError ||
    err instanceof UnsupportedVersionError ||
    err instanceof InvalidRequestError
  );
}

export interface ServeOptions<Req> extends JsonStreamLimits {
  requestSchema: z.ZodType<Req>;
  violations: ViolationTracker;
  handler: (request: Req, emit: Emit, context: HandlerContext) => Promise<void>;
}

/** Serve one inbound stream. Never throws: every failure ends in an error frame and/or an aborted stream. */
export async function serveJsonStream<Req>(stream: Stream, connection: Connection, options: ServeOptions<Req>): Promise<void> {
  const frames = new FrameStream(stream, { maxFrameBytes: options.maxRequestBytes, readTimeoutMs: options.readTimeoutMs });
  const cancelled = new AbortController();
  const onClose = () => cancelled.abort(new StreamAbortedError('the client closed the stream'));
  stream.addEventListener('close', onClose);
  try {
    let request: Req;
    try {
      request = await readRequest(frames, options);
    } catch (err) {
      // Answer first: a violation may hang up on the peer, and it should still learn why.
      await sendErrorFrame(frames, err);
      if (isProtocolViolation(err)) options.violations.record(connection.remotePeer, err as Error);
      return;
    }
    const emit: Emit = async (data) => {
      const bytes = new TextEncoder().encode(JSON.stringify({ t: 'data', d: data }));
      if (bytes.byteLength > options.maxResponseFrameBytes) {
        throw new ResponseTooLargeError(`response frame of ${bytes.byteLength} bytes exceeds ${options.maxResponseFrameBytes}`);
      }
      await frames.write(bytes, cancelled.signal);
    };
    try {
      await options.handler(request, emit, { peerId: connection.remotePeer.toString(), signal: cancelled.signal });
      await frames.writeJson({ t: 'end' }, cancelled.signal);
      await frames.close();
    } catch (err) {
      if (cancelled.signal.aborted) return;
      await sendErrorFrame(frames, err);
    }
  } finally {
    stream.removeEventListener('close', onClose);
  }
}

async function readRequest<Req>(frames: FrameStream, options: ServeOptions<Req>): Promise<Req> {
  const envelope = await frames.readJson(RequestEnvelope);
  if (envelope.v !== options.version) throw new UnsupportedVersionError(`version ${envelope.v} is not supported (speaks ${options.version})`);
  const parsed = options.requestSchema.safeParse(envelope.body);
  if (!parsed.success) throw new InvalidRequestError(parsed.error.issues[0]?.message ?? 'invalid request');
  return parsed.data;
}


export interface RequestOptions extends JsonStreamLimits {
  libp2p: Pick<Libp2p, 'dialProtocol'>;
  peer: PeerId;
  protocol: string;
  body: unknown;
  signal?: AbortSignal;
  violations?: ViolationTracker;
}

/**
 * Send one request and iterate the response's data frames. Breaking out of the loop (or aborting `signal`)
 * aborts the stream, which cancels the server's handler. An error frame is rethrown as a RemoteError whose
 * `name` is the remote error's name.
 */
export async function* requestJsonStream(options: RequestOptions): AsyncGenerator<unknown, void, undefined> {
  const requestBytes = new TextEncoder().encode(JSON.stringify({ v: options.version, body: options.body }));
  if (requestBytes.byteLength > options.maxRequestBytes) {
    throw new InvalidRequestError(`request of ${requestBytes.byteLength} bytes exceeds ${options.maxRequestBytes}`);
  }
  const stream = await options.libp2p.dialProtocol(options.peer, options.protocol, { signal: options.signal });
  const frames = new FrameStream(stream, { maxFrameBytes: options.maxResponseFrameBytes, readTimeoutMs: options.readTimeoutMs });
  let finished = false;
  try {
    await frames.write(requestBytes, options.signal);
    await frames.close(options.signal);
    while (true) {
      let frame: z.infer<typeof ResponseFrame>;
      try {
        frame = await frames.readJson(ResponseFrame, options.signal);
      } catch (err) {
        if (isProtocolViolation(err)) options.violations?.record(options.peer, err as Error);
        throw err;
      }
      if (frame.t === 'data') yield frame.d;
      else if (frame.t === 'end') {
        finished = true;
        return;
      } else {
        finished = true;
        throw new RemoteError(frame.name, frame.message);
      }
    }
  } finally {
    if (!finished) stream.abort(new StreamAbortedError('the client stopped reading'));
  }
}
