/**
 * The client peer's side: episodes whose model lives on another peer. The seam into the local HTTP API is two
 * routers mounted in front of the local ones (relay-routes.ts); both consult this registry first and hand
 * everything else to the local routers untouched.
 *
 * An episode is begun on the least-loaded connected peer that announces the model; its API key (minted by that
 * server peer) is the registry's key for relaying gateway calls. When the server peer drops, its episodes wait
 * for it through a grace period (the node redials it with backoff meanwhile): calls made in that time wait for
 * the reconnection. A peer not back by then, one that left the swarm while connected, or one that said goodbye
 * in presence (a clean stop: no grace, it is not coming back) makes its episodes gone: the agent's next call (or the runner's end) gets PeerGoneError, and the next episode goes to another peer.
 */
import { peerIdFromString } from '@libp2p/peer-id';
import type { PresenceEntry, SwarmNode } from '../../../p2p/index.ts';
import type { CreateEpisodeRequest } from '../../common/swarm-api.ts';
import { HttpError } from '../http/errors.ts';
import type { Logger } from '../log.ts';
import { noPeerHosts, noServerNow, peerGone } from './errors.ts';
import { EpisodeRpcAnswer, type EpisodeRpc } from './wire.ts';

/** How many remote episodes are remembered after they end (late calls still reach their server). */
const REMEMBERED_EPISODES = 10_000;
/** How long a dropped server peer has to come back before its episodes are aborted. */
export const PEER_GRACE_MS = 15_000;
/** Redials of a dropped server peer within the grace: 250 ms, 500 ms, 1 s, … capped at REDIAL_MAX_MS. */
const REDIAL_FIRST_MS = 250;
const REDIAL_MAX_MS = 4_000;
/** After a failed RPC: a peer that does not answer a ping within this is treated as dropped. */
const PING_TIMEOUT_MS = 2_000;

export interface RemoteEpisodesInit {
  graceMs?: number;
}

/** A server peer that dropped with episodes here, within its grace period. */
interface AwayPeer {
  /** Resolves true when it is back, false when the grace ran out. */
  back: Promise<boolean>;
  settle: (back: boolean) => void;
  timer: NodeJS.Timeout;
}

export interface RemoteEpisode {
  episodeId: string;
  apiKey: string;
  peerId: string;
  model: string;
  /** The client it was begun for here (only that client's key may end or abort it); null when none. */
  client: string | null;
  /** Set once the server peer is gone: why. */
  gone?: string;
  /** Set once it ended or was aborted: remembered for late calls, no longer waited for. */
  finished?: boolean;
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
  private readonly away = new Map<string, AwayPeer>();
  /** Every model a peer has announced since this node started: one without a server now is waited for, not unknown. */
  private readonly seenModels = new Set<string>();
  private readonly graceMs: number;
  private closed = false;

  constructor(
    private readonly node: SwarmNode,
    private readonly log: Logger,
    init: RemoteEpisodesInit = {},
  ) {
    this.graceMs = init.graceMs ?? PEER_GRACE_MS;
    node.libp2p.addEventListener('peer:disconnect', this.onDisconnect);
    node.libp2p.addEventListener('peer:connect', this.onConnect);
    const remember = (entry: PresenceEntry) => {
      for (const model of announcedModels(entry)) for (const name of [model.name, ...(model.aliases ?? [])]) this.seenModels.add(name);
    };
    node.presence.on('join', remember);
    node.presence.on('update', remember);
    node.presence.on('leave', (entry) => {
      // A goodbye: it stopped cleanly. Silent while disconnected: the grace decides. Silent while connected: it left.
      if (entry.reason === 'goodbye') this.peerLeft(entry.peerId, 'it stopped (said goodbye)');
      else if (this.isConnected(entry.peerId)) this.peerLeft(entry.peerId, 'left the swarm');
      else this.startGrace(entry.peerId);
    });
  }

  /** Stop the grace timers and redials (the node is stopping). */
  close(): void {
    this.closed = true;
    this.node.libp2p.removeEventListener('peer:disconnect', this.onDisconnect);
    this.node.libp2p.removeEventListener('peer:connect', this.onConnect);
    for (const [peerId, away] of this.away) {
      clearTimeout(away.timer);
      away.settle(false);
      this.away.delete(peerId);
    }
  }

  /** Whether the server peer of this episode is within its grace period (dropped, not yet given up). */
  isAway(episode: RemoteEpisode): boolean {
    return this.away.has(episode.peerId);
  }

  /**
   * Wait (up to the grace) for the episode's server peer if it dropped; PeerGoneError when it is gone or does
   * not come back in time.
   */
  async reachable(episode: RemoteEpisode): Promise<void> {
    const tracked = this.byId.get(episode.episodeId) ?? episode;
    const away = this.away.get(tracked.peerId);
    if (away && !tracked.gone) await away.back;
    if (tracked.gone) {
      episode.gone ??= tracked.gone;
      throw peerGone(episode.episodeId, episode.peerId, tracked.gone);
    }
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
    if (peers.length === 0) {
      // A model the swarm served a moment ago (its server restarting, say) is worth waiting for; one never seen is not.
      if (this.seenModels.has(request.model) || this.swarmModels().includes(request.model)) throw noServerNow(request.model);
      throw noPeerHosts(request.model, this.swarmModels());
    }
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
        client: request.client ?? null,
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
    const answer = await this.callFor(episode, { type: 'end', episodeId: episode.episodeId, result });
    this.finish(episode);
    return answer;
  }

  async abort(episode: RemoteEpisode, reason: string): Promise<Record<string, unknown>> {
    const answer = await this.callFor(episode, { type: 'abort', episodeId: episode.episodeId, reason });
    this.finish(episode);
    return answer;
  }

  private finish(episode: RemoteEpisode): void {
    const tracked = this.byId.get(episode.episodeId);
    if (tracked) tracked.finished = true;
  }

  /**
   * After a call to the episode's server failed: whether the server is (back) within its grace period, so the call
   * is worth sending again. A server that does not answer a ping is hung up on and given its grace.
   */
  async recovered(episode: RemoteEpisode): Promise<boolean> {
    if (await this.answersPing(episode.peerId)) return false;
    // The connection died under the call (its disconnect may not even be reported yet): close it, so that the peer
    // gets its grace and a fresh connection.
    await this.node.libp2p.hangUp(peerIdFromString(episode.peerId)).catch(() => undefined);
    this.startGrace(episode.peerId);
    try {
      await this.reachable(episode);
      return true;
    } catch {
      return false;
    }
  }

  /** Tells the server to abort, whatever this side believes; failures are ignored (it may really be gone). */
  abortQuietly(episode: RemoteEpisode, reason: string): void {
    this.call(episode.peerId, { type: 'abort', episodeId: episode.episodeId, reason }).catch(() => {});
  }

  /** Marks the episode gone after a failed relay (the server peer did not answer). */
  markGone(episode: RemoteEpisode, why: string): void {
    const tracked = this.byId.get(episode.episodeId);
    if (tracked) tracked.gone ??= why;
    episode.gone ??= tracked?.gone ?? why;
  }

  /** An RPC about an episode; a drop within the grace is waited out and the RPC sent again once. */
  private async callFor(episode: RemoteEpisode, rpc: EpisodeRpc): Promise<Record<string, unknown>> {
    await this.reachable(episode);
    try {
      return await this.call(episode.peerId, rpc);
    } catch (err) {
      if (err instanceof HttpError) throw err;
      let failure = err as Error;
      if (await this.recovered(episode)) {
        try {
          return await this.call(episode.peerId, rpc);
        } catch (retryErr) {
          if (retryErr instanceof HttpError) throw retryErr;
          failure = retryErr as Error;
        }
      }
      this.markGone(episode, `it did not answer: ${failure.name}`);
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

  private readonly onDisconnect = (event: CustomEvent<{ toString(): string }>): void => this.startGrace(event.detail.toString());

  private readonly onConnect = (event: CustomEvent<{ toString(): string }>): void => {
    const peerId = event.detail.toString();
    const away = this.away.get(peerId);
    if (!away) return;
    clearTimeout(away.timer);
    this.away.delete(peerId);
    this.log.info('server peer back within the grace period: its episodes go on', { peer: peerId });
    away.settle(true);
  };

  private async answersPing(peerId: string): Promise<boolean> {
    if (!this.isConnected(peerId)) return false;
    try {
      await this.node.libp2p.services.ping.ping(peerIdFromString(peerId), { signal: AbortSignal.timeout(PING_TIMEOUT_MS) });
      return true;
    } catch {
      return false;
    }
  }

  private isConnected(peerId: string): boolean {
    return this.node.connectedPeers().includes(peerId);
  }

  /** A server peer with live episodes here dropped: give it the grace period, redialling it meanwhile. */
  private startGrace(peerId: string): void {
    if (this.closed || this.away.has(peerId) || this.isConnected(peerId)) return;
    if (![...this.byId.values()].some((episode) => episode.peerId === peerId && !episode.gone && !episode.finished)) return;
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const timer = setTimeout(() => {
      this.away.delete(peerId);
      this.peerLeft(peerId, `disconnected for more than ${this.graceMs} ms`);
      resolve(false);
    }, this.graceMs);
    this.away.set(peerId, { back: promise, settle: resolve, timer });
    this.log.warn('server peer dropped: its episodes wait for it', { peer: peerId, graceMs: this.graceMs });
    void this.redial(peerId);
  }

  /** Dial the dropped peer with backoff until it is back or its grace ends (the node's own redials may win). */
  private async redial(peerId: string): Promise<void> {
    let delay = REDIAL_FIRST_MS;
    while (this.away.has(peerId) && !this.closed) {
      await new Promise((resolve) => setTimeout(resolve, delay));
      if (!this.away.has(peerId) || this.closed) return;
      await this.node.libp2p.dial(peerIdFromString(peerId), { signal: AbortSignal.timeout(delay * 2) }).catch(() => undefined);
      delay = Math.min(delay * 2, REDIAL_MAX_MS);
    }
  }

  private peerLeft(peerId: string, why: string): void {
    const away = this.away.get(peerId);
    if (away) {
      // Its grace is over: calls waiting for it get their PeerGoneError now.
      clearTimeout(away.timer);
      this.away.delete(peerId);
    }
    let aborted = 0;
    for (const episode of this.byId.values()) {
      if (episode.peerId !== peerId || episode.gone) continue;
      episode.gone = why;
      if (!episode.finished) aborted++;
    }
    // One line per peer, not per remembered episode (thousands on a busy peer).
    if (aborted > 0) this.log.warn('server peer gone: its remote episodes were aborted', { peer: peerId, episodes: aborted, why });
    away?.settle(false);
  }
}

function announcedModels(entry: PresenceEntry): AnnouncedModel[] {
  return entry.announcement.models as AnnouncedModel[];
}
