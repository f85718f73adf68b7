/**
 * Episodes: what a client starts, what every gateway call is attributed to, and what the training loop learns from.
 *
 * Life of an episode: `create` (pool slot on its model, row in the store, an API key) → LLM calls through the gateway
 * (each recorded by the context tracker and stored as it completes) → `end` with a reward (the episode, its
 * timelines merged in its model's training mode, and its state are written in one transaction before the answer) or `abort` (never trained on). No LLM
 * call for `idleTimeoutS` aborts it. Either way its key dies and its pool slot is freed.
 *
 * A finished episode is remembered for a while so that a late `end` or a call with its key gets a clear answer
 * ("episode … was aborted: idle timeout") instead of a bare "unknown key".
 */
import { randomBytes } from 'node:crypto';
import type { CreateEpisodeRequest, EndEpisodeRequest } from '../../common/swarm-api.ts';
import { DEFAULT_IDLE_TIMEOUT_S, createEpisodeRequestSchema, type EpisodeSampling } from '../../common/swarm-api.ts';
import type { Database } from 'better-sqlite3';
import type { EpisodeMeta } from '../../common/timeline/export.ts';
import type { MergeMode } from '../../common/timeline/merge.ts';
import { abortEpisode, countCancelledCall, endEpisode, insertCall, insertEpisode } from '../store/episodes.ts';
import { ContextTracker, type EpisodeTracker } from '../tracker/tracker.ts';
import type { Logger } from '../log.ts';
import type { HostedModel, ModelHost } from '../models/model-host.ts';
import { mintEpisodeKey, verifyEpisodeKey } from './keys.ts';

/** How many finished episodes are remembered for clear late answers (a few hours of a busy peer). */
const FINISHED_MEMORY = 10_000;

export class EpisodeError extends Error {
  constructor(
    override readonly name: 'UnknownModelError' | 'EpisodeNotActiveError' | 'UnknownEpisodeError' | 'InvalidEpisodeKeyError' | 'ExpiredEpisodeKeyError',
    message: string,
  ) {
    super(message);
  }
}

export interface ActiveEpisode {
  readonly meta: EpisodeMeta;
  readonly model: HostedModel;
  readonly sampling: EpisodeSampling;
  /** Names the agent may use for the model in this episode only, besides the model's own name and host aliases. */
  readonly aliases: readonly string[];
  readonly tracker: EpisodeTracker;
  readonly idleTimeoutS: number;
  /** LLM calls running now (they hold the idle timer and delay `end`). */
  inflight: number;
  idleTimer: NodeJS.Timeout | undefined;
  /** Resolves when `inflight` drops to 0. */
  settled: Promise<void> | undefined;
  settle: (() => void) | undefined;
}

/** Every name an episode's agent may send as `model`: the model's name, its host aliases, then the episode's own. */
export function episodeModelNames(episode: Pick<ActiveEpisode, 'model' | 'aliases'>): string[] {
  return [episode.model.name, ...episode.model.aliases, ...episode.aliases];
}

export interface EpisodeServiceOptions {
  models: ModelHost;
  /** The peer's store (episodes, calls and timelines tables). */
  db: Database;
  /** Node secret (hex) that signs episode keys. */
  secret: string;
  gatewayUrl: () => string;
  log: Logger;
  /**
   * The mode a model's episodes are merged in when they end: the one its training loop trains with, so the stored
   * timelines are the ones trained on and the ones the merge view shows. Default: 'merged' for every model.
   */
  mergeModeOf?: (model: string) => MergeMode;
  /** How often the model's held-out tasks should run (training setting evalEvery; default 0, once per pass). */
  evalEveryOf?: (model: string) => number;
}

/** A begin request as validated (defaults filled in). */
type ParsedBegin = ReturnType<typeof createEpisodeRequestSchema.parse>;

function newEpisodeId(): string {
  return `ep_${randomBytes(9).toString('base64url')}`;
}

export class EpisodeService {
  private readonly active = new Map<string, ActiveEpisode>();
  /** Finished episodes, oldest first: id → why they are over. */
  private readonly finished = new Map<string, string>();
  private readonly tracker: ContextTracker;

  constructor(private readonly options: EpisodeServiceOptions) {
    this.tracker = new ContextTracker({ sink: (episodeId, call) => insertCall(options.db, episodeId, call) });
  }

  get activeCount(): number {
    return this.active.size;
  }

  activeIds(): IterableIterator<string> {
    return this.active.keys();
  }

  /** Starts an episode. Throws UnknownModelError, ModelNotReadyError (draining, updating …), PoolFullError or AdmissionThrottledError. */
  create(request: CreateEpisodeRequest) {
    const { req, model } = this.resolve(request);
    const episodeId = newEpisodeId();
    model.admitEpisode(episodeId, req.kind);
    return this.started(req, model, episodeId);
  }

  /**
   * Starts an episode as `create` does, except that a train episode refused by the staleness bound of asynchronous
   * training waits for it (HostedModel.admitEpisodeWhenOpen, bounded by the model's admissionHoldMs) rather than
   * being refused at once. `signal`: the client went away; its begin is then never admitted.
   */
  async createWhenAdmitted(request: CreateEpisodeRequest, signal?: AbortSignal) {
    const { req, model } = this.resolve(request);
    const episodeId = newEpisodeId();
    await model.admitEpisodeWhenOpen(episodeId, req.kind, signal);
    return this.started(req, model, episodeId);
  }

  private resolve(request: CreateEpisodeRequest): { req: ParsedBegin; model: HostedModel } {
    const req = createEpisodeRequestSchema.parse(request);
    const model = this.options.models.find(req.model);
    if (!model) {
      const known = this.options.models.models.flatMap((m) => m.names);
      throw new EpisodeError('UnknownModelError', `no hosted model is called "${req.model}"; this peer serves: ${known.join(', ') || 'none'}`);
    }
    return { req, model };
  }

  /** The episode's row, tracker and idle timer, once its model admitted it. */
  private started(req: ParsedBegin, model: HostedModel, episodeId: string) {
    let meta: EpisodeMeta;
    try {
      meta = insertEpisode(this.options.db, {
        id: episodeId,
        model: model.name,
        taskId: req.taskId,
        kind: req.kind,
        policyVersion: model.policyVersion,
        client: req.client ?? null,
        scriptHash: req.scriptHash ?? null,
        teamId: req.teamId ?? null,
      });
    } catch (err) {
      model.releaseEpisode({ episodeId, model: model.name, groupId: req.taskId, kind: req.kind, outcome: 'aborted', reward: null, policyVersion: model.policyVersion });
      throw err;
    }
    const episode: ActiveEpisode = {
      meta,
      model,
      sampling: req.sampling ?? {},
      aliases: [...new Set(req.aliases ?? [])].filter((a) => !model.answersTo(a)),
      tracker: this.tracker.begin({ episodeId, tokenizer: model.tokenizer, template: model.template }),
      // The server's cap wins: one episode asking for a day must not hold a pool slot that long.
      idleTimeoutS: Math.min(req.idleTimeoutS ?? DEFAULT_IDLE_TIMEOUT_S, model.maxIdleTimeoutS),
      inflight: 0,
      idleTimer: undefined,
      settled: undefined,
      settle: undefined,
    };
    this.active.set(episodeId, episode);
    this.armIdleTimer(episode);
    this.options.log.debug('episode started', { episodeId, model: model.name, taskId: req.taskId, kind: req.kind });
    return {
      episodeId,
      baseUrl: this.options.gatewayUrl(),
      apiKey: mintEpisodeKey(this.options.secret, episodeId),
      model: model.name,
      policyVersion: meta.policyVersion,
      step: model.step,
      evalEvery: this.options.evalEveryOf?.(model.name) ?? 0,
    };
  }

  /** The live episode an API key belongs to; throws InvalidEpisodeKeyError, ExpiredEpisodeKeyError or EpisodeNotActiveError. */
  authenticate(key: string | undefined): ActiveEpisode {
    if (!key) throw new EpisodeError('InvalidEpisodeKeyError', 'missing API key; use the apiKey returned by POST /swarm/v1/episodes');
    const episodeId = verifyEpisodeKey(this.options.secret, key);
    if (!episodeId) throw new EpisodeError('InvalidEpisodeKeyError', 'invalid API key: not an episode key of this peer');
    const episode = this.active.get(episodeId);
    if (episode) return episode;
    const why = this.finished.get(episodeId);
    if (why) throw new EpisodeError('EpisodeNotActiveError', `episode ${episodeId} is not active (${why}); start a new episode`);
    throw new EpisodeError('ExpiredEpisodeKeyError', `the key of episode ${episodeId} has expired (the episode is over); start a new episode`);
  }

  /** A gateway call begins: holds the idle timer until `callEnded`. */
  callStarted(episode: ActiveEpisode): void {
    episode.inflight += 1;
    clearTimeout(episode.idleTimer);
    episode.idleTimer = undefined;
  }

  /** The client hung up before a call's answer was complete: counted on the episode, in no timeline. */
  callCancelled(episode: ActiveEpisode): void {
    countCancelledCall(this.options.db, episode.meta.id);
    this.options.log.info('call cancelled: the client hung up before the answer was complete', { episodeId: episode.meta.id });
  }

  callEnded(episode: ActiveEpisode): void {
    episode.inflight -= 1;
    if (episode.inflight > 0) return;
    episode.settle?.();
    episode.settled = episode.settle = undefined;
    if (this.active.has(episode.meta.id)) this.armIdleTimer(episode);
  }

  /**
   * Ends an episode with its reward. Waits for its calls in flight, then persists the final state and merged
   * timelines in one transaction; only then does it answer.
   */
  async end(episodeId: string, result: EndEpisodeRequest) {
    const episode = this.requireActive(episodeId);
    await this.whenSettled(episode);
    this.requireActive(episodeId); // an abort may have won the race while we waited
    const tracker = episode.tracker;
    // Merged once, here: training and the merge view read these stored timelines.
    const merge = tracker.merge(this.options.mergeModeOf?.(episode.model.name) ?? 'merged');
    const meta = endEpisode(this.options.db, episodeId, {
      reward: result.reward,
      success: result.success ?? null,
      metrics: result.metrics ?? null,
      calls: tracker.calls,
      merge,
    });
    this.retire(episode, 'it has ended');
    episode.model.releaseEpisode({
      episodeId,
      model: episode.model.name,
      groupId: meta.groupId,
      kind: meta.kind,
      outcome: 'ended',
      reward: result.reward,
      policyVersion: meta.policyVersion,
    });
    return { episodeId, state: 'ended' as const, calls: tracker.calls.length, timelines: merge.timelines.length };
  }

  /** Aborts an episode: it is stored as aborted (with its calls, for inspection) and never trained on. */
  abort(episodeId: string, reason: string) {
    const episode = this.requireActive(episodeId);
    const meta = abortEpisode(this.options.db, episodeId, reason);
    this.retire(episode, `it was aborted: ${reason}`);
    episode.model.releaseEpisode({
      episodeId,
      model: episode.model.name,
      groupId: meta.groupId,
      kind: meta.kind,
      outcome: 'aborted',
      reward: null,
      policyVersion: meta.policyVersion,
    });
    this.options.log.info('episode aborted', { episodeId, reason });
    return { episodeId, state: 'aborted' as const, calls: episode.tracker.calls.length, timelines: 0 };
  }

  /** Aborts every live episode (peer shutting down). */
  abortAll(reason: string): void {
    for (const id of [...this.active.keys()]) {
      try {
        this.abort(id, reason);
      } catch (err) {
        this.options.log.warn('could not abort episode', { episodeId: id, error: String(err) });
      }
    }
  }

  private requireActive(episodeId: string): ActiveEpisode {
    const episode = this.active.get(episodeId);
    if (episode) return episode;
    const why = this.finished.get(episodeId);
    if (why) throw new EpisodeError('EpisodeNotActiveError', `episode ${episodeId} is not active (${why}); its result is refused`);
    throw new EpisodeError('UnknownEpisodeError', `no episode ${episodeId} on this peer`);
  }

  private whenSettled(episode: ActiveEpisode): Promise<void> {
    if (episode.inflight === 0) return Promise.resolve();
    if (!episode.settled) {
      const { promise, resolve } = Promise.withResolvers<void>();
      episode.settled = promise;
      episode.settle = resolve;
    }
    return episode.settled;
  }

  private retire(episode: ActiveEpisode, why: string): void {
    clearTimeout(episode.idleTimer);
    this.active.delete(episode.meta.id);
    this.tracker.finish(episode.meta.id);
    this.finished.set(episode.meta.id, why);
    if (this.finished.size > FINISHED_MEMORY) this.finished.delete(this.finished.keys().next().value!);
  }

  private armIdleTimer(episode: ActiveEpisode): void {
    clearTimeout(episode.idleTimer);
    episode.idleTimer = setTimeout(() => {
      if (!this.active.has(episode.meta.id) || episode.inflight > 0) return;
      this.abort(episode.meta.id, `idle timeout: no LLM call for ${episode.idleTimeoutS} s`);
    }, episode.idleTimeoutS * 1000);
    episode.idleTimer.unref();
  }
}
