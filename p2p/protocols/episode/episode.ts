/**
 * `/agentjet/episode/1`: request/response JSON RPC. The payloads (begin / end / abort an episode) belong to
 * the swarm runtime; this protocol only carries them, bounded and validated as JSON objects.
 */
import type { PeerId } from '@libp2p/interface';
import { z } from 'zod';
import { JsonStreamService } from '../shared/service.ts';
import type { ProtocolComponents } from '../shared/service.ts';
import {
  EPISODE_PROTOCOL,
  EPISODE_PROTOCOL_VERSION,
  EPISODE_READ_TIMEOUT_MS,
  MAX_EPISODE_INBOUND_STREAMS,
  MAX_EPISODE_MESSAGE_BYTES,
} from './constants.ts';
import { MissingResponseError } from './errors.ts';

export const EpisodeMessage = z.record(z.string(), z.unknown());
export type EpisodeMessage = z.infer<typeof EpisodeMessage>;

export type EpisodeHandler = (request: EpisodeMessage, context: { peerId: string; signal: AbortSignal }) => Promise<EpisodeMessage>;

export interface EpisodeInit {
  maxMessageBytes?: number;
  readTimeoutMs?: number;
  maxInboundStreams?: number;
}

export class EpisodeProtocol {
  private readonly service: JsonStreamService<EpisodeMessage>;

  constructor(components: ProtocolComponents, init: EpisodeInit = {}) {
    const maxMessageBytes = init.maxMessageBytes ?? MAX_EPISODE_MESSAGE_BYTES;
    this.service = new JsonStreamService(components, {
      protocol: EPISODE_PROTOCOL,
      version: EPISODE_PROTOCOL_VERSION,
      requestSchema: EpisodeMessage,
      maxRequestBytes: maxMessageBytes,
      maxResponseFrameBytes: maxMessageBytes,
      readTimeoutMs: init.readTimeoutMs ?? EPISODE_READ_TIMEOUT_MS,
      maxInboundStreams: init.maxInboundStreams ?? MAX_EPISODE_INBOUND_STREAMS,
    });
  }

  start(): Promise<void> {
    return this.service.start();
  }

  stop(): Promise<void> {
    return this.service.stop();
  }

  /** Answer episode requests (replaces any previous handler; undefined stops serving). */
  handle(handler: EpisodeHandler | undefined): void {
    this.service.setHandler(
      handler &&
        (async (request, emit, context) => {
          const response = EpisodeMessage.parse(await handler(request, context));
          await emit(response);
        }),
    );
  }

  /** Send one message and wait for the answer; a remote failure throws an error with the remote's name. */
  async request(peer: string | PeerId, message: EpisodeMessage, options: { signal?: AbortSignal } = {}): Promise<EpisodeMessage> {
    for await (const frame of this.service.request(peer, message, options.signal)) {
      const parsed = EpisodeMessage.safeParse(frame);
      if (!parsed.success) throw new MissingResponseError('the response is not a JSON object');
      return parsed.data;
    }
    throw new MissingResponseError('the peer answered with no response');
  }
}
