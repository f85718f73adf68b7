/**
 * The plumbing every request/stream protocol shares: registers the libp2p handler on start (with a cap on
 * concurrent inbound streams), unregisters on stop, forwards requests to the handler the caller plugged in
 * (or answers NoHandlerError), and opens client requests.
 */
import type { Libp2p, PeerId } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import type { z } from 'zod';
import { NoHandlerError } from './errors.ts';
import { requestJsonStream, serveJsonStream } from './json-stream.ts';
import type { Emit, HandlerContext, JsonStreamLimits } from './json-stream.ts';
import type { ViolationTracker } from './violations.ts';

/** What a protocol service needs from its node. */
export interface ProtocolComponents {
  libp2p: Pick<Libp2p, 'handle' | 'unhandle' | 'dialProtocol'>;
  violations: ViolationTracker;
}

export interface JsonStreamServiceConfig<Req> extends JsonStreamLimits {
  protocol: string;
  requestSchema: z.ZodType<Req>;
  maxInboundStreams: number;
}

export type StreamHandlerFn<Req> = (request: Req, emit: Emit, context: HandlerContext) => Promise<void>;

export function toPeerId(peer: string | PeerId): PeerId {
  return typeof peer === 'string' ? peerIdFromString(peer) : peer;
}

export class JsonStreamService<Req> {
  private handler?: StreamHandlerFn<Req>;
  private started = false;

  constructor(
    private readonly components: ProtocolComponents,
    readonly config: JsonStreamServiceConfig<Req>,
  ) {}

  async start(): Promise<void> {
    if (this.started) return;
    await this.components.libp2p.handle(
      this.config.protocol,
      (stream, connection) =>
        serveJsonStream(stream, connection, {
          ...this.config,
          violations: this.components.violations,
          handler: (request, emit, context) => {
            if (!this.handler) throw new NoHandlerError(`no handler for ${this.config.protocol}`);
            return this.handler(request, emit, context);
          },
        }),
      { maxInboundStreams: this.config.maxInboundStreams },
    );
    this.started = true;
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    await this.components.libp2p.unhandle(this.config.protocol);
  }

  setHandler(handler: StreamHandlerFn<Req> | undefined): void {
    this.handler = handler;
  }

  request(peer: string | PeerId, body: Req, signal?: AbortSignal): AsyncGenerator<unknown, void, undefined> {
    return requestJsonStream({
      ...this.config,
      libp2p: this.components.libp2p,
      violations: this.components.violations,
      peer: toPeerId(peer),
      body,
      signal,
    });
  }
}
