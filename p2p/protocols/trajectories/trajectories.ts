/**
 * `/agentjet/trajectories/1`: ask a peer for the trajectories of some episodes, receive a stream of JSON
 * records. The receiving side drops records whose id it has already seen (in this fetch), so that a peer
 * retried or several peers asked never yield a trajectory twice.
 */
import type { PeerId } from '@libp2p/interface';
import { z } from 'zod';
import { JsonStreamService } from '../shared/service.ts';
import type { ProtocolComponents } from '../shared/service.ts';
import {
  MAX_EPISODE_ID_CHARS,
  MAX_EPISODE_IDS,
  MAX_TRAJECTORIES_INBOUND_STREAMS,
  MAX_TRAJECTORIES_REQUEST_BYTES,
  MAX_TRAJECTORY_RECORD_BYTES,
  TRAJECTORIES_PROTOCOL,
  TRAJECTORIES_PROTOCOL_VERSION,
  TRAJECTORIES_READ_TIMEOUT_MS,
} from './constants.ts';
import { InvalidTrajectoryRecordError } from './errors.ts';

export const TrajectoriesRequest = z.object({
  episodeIds: z.array(z.string().min(1).max(MAX_EPISODE_ID_CHARS)).max(MAX_EPISODE_IDS),
});
export type TrajectoriesRequest = z.infer<typeof TrajectoriesRequest>;

export const TrajectoryRecord = z.looseObject({ id: z.string().min(1).max(MAX_EPISODE_ID_CHARS) });
export type TrajectoryRecord = z.infer<typeof TrajectoryRecord>;

/** The data source: emit one record per requested episode it has (unknown ids are simply skipped). */
export type TrajectoriesHandler = (
  episodeIds: string[],
  emit: (record: TrajectoryRecord) => Promise<void>,
  context: { peerId: string; signal: AbortSignal },
) => Promise<void>;

export interface TrajectoriesInit {
  maxRecordBytes?: number;
  readTimeoutMs?: number;
  maxInboundStreams?: number;
}

export class TrajectoriesProtocol {
  private readonly service: JsonStreamService<TrajectoriesRequest>;

  constructor(components: ProtocolComponents, init: TrajectoriesInit = {}) {
    this.service = new JsonStreamService(components, {
      protocol: TRAJECTORIES_PROTOCOL,
      version: TRAJECTORIES_PROTOCOL_VERSION,
      requestSchema: TrajectoriesRequest,
      maxRequestBytes: MAX_TRAJECTORIES_REQUEST_BYTES,
      maxResponseFrameBytes: init.maxRecordBytes ?? MAX_TRAJECTORY_RECORD_BYTES,
      readTimeoutMs: init.readTimeoutMs ?? TRAJECTORIES_READ_TIMEOUT_MS,
      maxInboundStreams: init.maxInboundStreams ?? MAX_TRAJECTORIES_INBOUND_STREAMS,
    });
  }

  start(): Promise<void> {
    return this.service.start();
  }

  stop(): Promise<void> {
    return this.service.stop();
  }

  handle(handler: TrajectoriesHandler | undefined): void {
    this.service.setHandler(
      handler &&
        ((request, emit, context) =>
          handler(request.episodeIds, (record) => emit(TrajectoryRecord.parse(record)), context)),
    );
  }

  /**
   * Fetch the records of `episodeIds` from one or several peers in turn, each id yielded at most once.
   * Peers after the first are only asked for the ids still missing.
   */
  async *fetch(
    peers: string | PeerId | Array<string | PeerId>,
    episodeIds: string[],
    options: { signal?: AbortSignal } = {},
  ): AsyncGenerator<TrajectoryRecord, void, undefined> {
    const wanted = new Set(episodeIds);
    const seen = new Set<string>();
    for (const peer of Array.isArray(peers) ? peers : [peers]) {
      const missing = [...wanted].filter((id) => !seen.has(id));
      if (missing.length === 0) return;
      for await (const frame of this.service.request(peer, { episodeIds: missing }, options.signal)) {
        const parsed = TrajectoryRecord.safeParse(frame);
        if (!parsed.success || !wanted.has(parsed.data.id)) {
          throw new InvalidTrajectoryRecordError('the peer sent a record without a requested id');
        }
        if (seen.has(parsed.data.id)) continue;
        seen.add(parsed.data.id);
        yield parsed.data;
      }
    }
  }
}
