/**
 * `/agentjet/infer/1`: one JSON request (an OpenAI-style call relayed to the peer hosting the model), answered
 * by a stream of JSON frames. The server side is a handler the swarm runtime plugs in; the client iterates.
 * Breaking out of the client loop or aborting its signal cancels the server handler's signal.
 */
import type { PeerId } from '@libp2p/interface';
import { z } from 'zod';
import { JsonStreamService } from '../shared/service.ts';
import type { ProtocolComponents } from '../shared/service.ts';
import {
  INFER_PROTOCOL,
  INFER_PROTOCOL_VERSION,
  INFER_READ_TIMEOUT_MS,
  MAX_INFER_FRAME_BYTES,
  MAX_INFER_INBOUND_STREAMS,
  MAX_INFER_REQUEST_BYTES,
} from './constants.ts';

export const InferRequest = z.record(z.string(), z.unknown());
export type InferRequest = z.infer<typeof InferRequest>;

export interface InferContext {
  /** The peer that sent the request. */
  peerId: string;
}

export type InferHandler = (
  request: InferRequest,
  emit: (frame: unknown) => Promise<void>,
  signal: AbortSignal,
  context: InferContext,
) => Promise<void>;

export interface InferInit {
  maxRequestBytes?: number;
  maxFrameBytes?: number;
  readTimeoutMs?: number;
  maxInboundStreams?: number;
}

export class InferProtocol {
  private readonly service: JsonStreamService<InferRequest>;

  constructor(components: ProtocolComponents, init: InferInit = {}) {
    this.service = new JsonStreamService(components, {
      protocol: INFER_PROTOCOL,
      version: INFER_PROTOCOL_VERSION,
      requestSchema: InferRequest,
      maxRequestBytes: init.maxRequestBytes ?? MAX_INFER_REQUEST_BYTES,
      maxResponseFrameBytes: init.maxFrameBytes ?? MAX_INFER_FRAME_BYTES,
      readTimeoutMs: init.readTimeoutMs ?? INFER_READ_TIMEOUT_MS,
      maxInboundStreams: init.maxInboundStreams ?? MAX_INFER_INBOUND_STREAMS,
    });
  }

  start(): Promise<void> {
    return this.service.start();
  }

  stop(): Promise<void> {
    return this.service.stop();
  }

  /** Serve inference requests (replaces any previous handler; undefined stops serving). */
  handle(handler: InferHandler | undefined): void {
    this.service.setHandler(handler && ((request, emit, context) => handler(request, emit, context.signal, { peerId: context.peerId })));
  }

  /** Send a request to `peer` and iterate its response frames; an error frame throws an error of the remote's name. */
  request(peer: string | PeerId, request: InferRequest, options: { signal?: AbortSignal } = {}): AsyncGenerator<unknown, void, undefined> {
    return this.service.request(peer, request, options.signal);
  }
}
