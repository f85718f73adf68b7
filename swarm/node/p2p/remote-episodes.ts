/**
 * The client peer's side: episodes whose model lives on another peer. The seam into the local HTTP API is two
 * routers mounted in front of the local ones (relay-routes.ts); both consult this registry first and hand
 * everything else to the local routers untouched.
 *
 * An episode is begun on the least-loaded connected peer that announces the model; its API key (minted by that
 * server peer) is the registry's key for relaying gateway calls. When the server peer drops, its episodes here
 * are marked gone: the agent's next call (or the runner's end) gets PeerGoneError, and the next episode goes to
 * another peer.
 */
import type { PresenceEntry, SwarmNode } from '../../../p2p/index.ts';
import type { CreateEpisodeRequest } from '../../common/swarm-api.ts';
import { HttpError } from '../http/errors.ts';
import type { Logger } from '../log.ts';
import { noPeerHosts, peerGone } from './errors.ts';
import { EpisodeRpcAnswer, type EpisodeRpc } from './wire.ts';

/** How many remote episodes are remembered after they end (late calls still reach their server). */
const REMEMBERED_EPISODES = 10_000;

export interface RemoteEpisode {
  episodeId: string;
  apiKey: string;
  peerId: string;
  model: string;
  /** Set once the server peer is gone: why. */
  gone?: string;
}

/** A model as announced in presence (p2p's HostedModel plus what this runtime adds). */
export interface AnnouncedModel {
  name: string;
  policyVersion: number;
  step?: number;
  aliases?: string[];
  state?: 'loading' | 'idle' | 'rolling' | 'draining' | 'updating' | 'failed';
  pool?: { active: number; limit: number };
}

export class RemoteEpisodes {
  private readonly byId = new Map<string, RemoteEpisode>();
  private readonly byKey = new Map<string, RemoteEpisode>();

  constructor(
    private readonly node: SwarmNode,
    private readonly log: Logger,
  ) {
    node.libp2p.addEventListener('peer:disconnect', (event) =>
      this.peerLeft(event.detail.toString(), 'disconnected'),
    );
    node.presence.on('leave', (entry) => this.peerLeft(entry.peerId, 'left the swarm'));
  }

  findByKey(apiKey: string): RemoteEpisode | undefined {
    return this.byKey.get(apiKey);
  }

  findById(episodeId: string): RemoteEpisode | undefined {
    return this.byId.get(episodeId);
  }

  /** Connected peers announcing `model` (name or alias), least loaded first. */
  candidates(model: string): PresenceEntry[] {
    const connected = new Set(this.node.connectedPeers());
    const load = (entry: PresenceEntry) =>
      entry.announcement.pool.load / Math.max(1, entry.announcement.pool.capacity);
    return this.node.presence
      .list()
      .filter(
        (entry) =>
          connected.has(entry.peerId) &&
          announcedModels(entry).some((m) => m.name === model || m.aliases?.includes(model)),
      )
      .sort((a, b) => load(a) - load(b));
  }

  /** Every model name the swarm announces (for error messages). */
  swarmModels(): string[] {
    return [
      ...new Set(this.node.presence.list().flatMap((entry) => announcedModels(entry).map((m) => m.name))),
    ];
  }

  /** Begins the episode on a peer hosting the model; peers that cannot be reached are skipped. */
  async begin(request: CreateEpisodeRequest): Promise<RemoteEpisode & { policyVersion: number }> {
    const peers = this.candidates(request.model);
    if (peers.length === 0) throw noPeerHosts(request.model, this.swarmModels());
    let lastError: unknown;
    for (const { peerId } of peers) {
      let result: Record<string, unknown>;
      try {
        result = await this.call(peerId, { type: 'begin', request: { ...request } });
      } catch (err) {
        if (err instanceof HttpError) throw err;
        lastError = err;
        this.log.warn('could not begin an episode on a peer; trying the next', {
          peer: peerId,
          error: String(err),
        });
        continue;
      }
      const episode: RemoteEpisode = {
        episodeId: String(result.episodeId),
        apiKey: String(result.apiKey),
        peerId,
        model: String(result.model),
      };
      this.remember(episode);
      return { ...episode, policyVersion: Number(result.policyVersion) };
    }
    throw new HttpError(
      503,
      'ServiceUnavailableError',
      `no swarm peer hosting "${request.model}" answered: ${String(lastError)}`,
      {
        code: 'peers_unreachable',
      },
    );
  }

  async end(episode: RemoteEpisode, result: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.callFor(episode, { type: 'end', episodeId: episode.episodeId, result });
  }

  async abort(episode: RemoteEpisode, reason: string): Promise<Record<string, unknown>> {
    return this.callFor(episode, { type: 'abort', episodeId: episode.episodeId, reason });
  }

  /** Tells the server to abort, whatever this side believes; failures are ignored (it may really be gone). */
  abortQuietly(episode: RemoteEpisode, reason: string): void {
    this.call(episode.peerId, { type: 'abort', episodeId: episode.episodeId, reason }).catch(() => {});
  }

  /** Marks the episode gone after a failed relay (the server peer did not answer). */
  markGone(episode: RemoteEpisode, why: string): void {
    episode.gone ??= why;
  }

  private async callFor(episode: RemoteEpisode, rpc: EpisodeRpc): Promise<Record<string, unknown>> {
    if (episode.gone) throw peerGone(episode.episodeId, episode.peerId, episode.gone);
    try {
      return await this.call(episode.peerId, rpc);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      this.markGone(episode, `it did not answer: ${(err as Error).name}`);
      throw peerGone(episode.episodeId, episode.peerId, episode.gone!);
    }
  }

  /** One episode RPC; a refusal by the server comes back as the same HttpError it would answer locally. */
  private async call(peerId: string, rpc: EpisodeRpc): Promise<Record<string, unknown>> {
    const answer = EpisodeRpcAnswer.parse(await this.node.episode.request(peerId, rpc));
    if (!answer.ok)
      throw new HttpError(answer.error.status, answer.error.name, answer.error.message, answer.error.details);
    return answer.result;
  }

  private remember(episode: RemoteEpisode): void {
    this.byId.set(episode.episodeId, episode);
    this.byKey.set(episode.apiKey, episode);
    if (this.byId.size > REMEMBERED_EPISODES) {
      const oldest = this.byId.values().next().value!;
      this.byId.delete(oldest.episodeId);
      this.byKey.delete(oldest.apiKey);
    }
  }

  private peerLeft(peerId: string, why: string): void {
    for (const episode of this.byId.values()) {
      if (episode.peerId !== peerId || episode.gone) continue;
      episode.gone = why;
      this.log.warn('server peer gone: remote episode aborted', {
        episodeId: episode.episodeId,
        peer: peerId,
        why,
      });
    }
  }
}

function announcedModels(entry: PresenceEntry): AnnouncedModel[] {
  return entry.announcement.models as AnnouncedModel[];
}
