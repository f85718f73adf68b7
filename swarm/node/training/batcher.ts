/**
 * The batcher: collects a model's finished episodes into GRPO groups (group id = task id) until `batchTasks`
 * groups of `groupSize` finished train episodes exist.
 *
 * Rules, in the order they apply:
 * - Eval episodes and aborted episodes are never trained on; they are marked and dropped at once.
 * - An episode sampled more than `maxPolicyLag` policy versions ago (asynchronous training: `staleness` η) is
 *   dropped as stale (on arrival, and when a batch is taken for the ones still waiting). The lag is counted from
 *   the version the episode began under, the oldest of its calls, so no token it holds lags more.
 * - Episodes of a task queue up in the order they finished; every `groupSize` of them form one group. So a
 *   late episode of a task whose group was already trained (it was still in flight while the step drained)
 *   simply starts that task's next group and goes into a later batch, while its policy lag allows.
 * - A group whose rewards are all equal carries zero advantage everywhere: with `excludeUniformGroups` it is
 *   marked `excluded-uniform-reward` and left out.
 * Every episode that leaves the batcher without being trained gets a mark with the reason: none is lost silently.
 */
import type { TrainingConfig } from './config.ts';

export interface BatchEpisode {
  episodeId: string;
  /** The GRPO group: the task id. */
  groupId: string;
  kind: 'train' | 'eval';
  outcome: 'ended' | 'aborted';
  reward: number | null;
  /** The policy version the episode was sampled under. */
  policyVersion: number;
}

/** What became of an episode the batcher was given. */
export type EpisodeDisposition =
  | 'queued'
  | 'trained'
  | 'excluded-uniform-reward'
  | 'ignored-eval'
  | 'ignored-aborted'
  | 'ignored-no-reward'
  | 'dropped-stale'
  | 'dropped-step-failed'
  | 'duplicate';

/** A final disposition of one episode, recorded so that the episodes view can say why it was (not) trained. */
export interface EpisodeMark {
  episodeId: string;
  groupId: string;
  disposition: Exclude<EpisodeDisposition, 'queued' | 'duplicate'>;
  detail: string;
  /** The train step that used (or would have used) the episode. */
  step?: number;
}

export interface BatchGroup<E extends BatchEpisode = BatchEpisode> {
  groupId: string;
  /** Exactly `groupSize` episodes, in finish order. */
  episodes: E[];
}

export type BatcherConfig = Pick<TrainingConfig, 'batchTasks' | 'groupSize' | 'excludeUniformGroups' | 'maxPolicyLag'> & Partial<Pick<TrainingConfig, 'staleness'>>;

/** The policy lag beyond which an episode is stale: asynchronous training's η when set, else maxPolicyLag. */
export function policyLagBound(config: BatcherConfig): number {
  return config.staleness ? config.staleness : config.maxPolicyLag;
}

export interface BatcherCounts {
  /** Train episodes waiting for their group to fill. */
  queuedEpisodes: number;
  /** Full, informative groups waiting for a batch. */
  completeGroups: number;
}

export class Batcher<E extends BatchEpisode = BatchEpisode> {
  private readonly queues = new Map<string, E[]>();
  private readonly complete: BatchGroup<E>[] = [];
  private readonly seen = new Set<string>();

  constructor(
    private readonly config: BatcherConfig,
    private readonly onMark: (mark: EpisodeMark) => void = () => {},
  ) {}

  /** Offers one finished episode; returns what became of it right now. */
  add(episode: E, currentPolicyVersion: number): EpisodeDisposition {
    if (this.seen.has(episode.episodeId)) return 'duplicate';
    this.seen.add(episode.episodeId);
    const ignored = this.ignoreReason(episode, currentPolicyVersion);
    if (ignored) {
      this.onMark({ episodeId: episode.episodeId, groupId: episode.groupId, ...ignored });
      return ignored.disposition;
    }
    const queue = this.queues.get(episode.groupId) ?? [];
    queue.push(episode);
    this.queues.set(episode.groupId, queue);
    if (queue.length >= this.config.groupSize) this.closeGroup(episode.groupId, queue);
    return 'queued';
  }

  get ready(): boolean {
    return this.complete.length >= this.config.batchTasks;
  }

  counts(): BatcherCounts {
    let queuedEpisodes = 0;
    for (const queue of this.queues.values()) queuedEpisodes += queue.length;
    return { queuedEpisodes, completeGroups: this.complete.length };
  }

  /**
   * Removes and returns the oldest `batchTasks` complete groups, or null when not enough are complete.
   * Stale episodes still waiting (and complete groups that went stale) are dropped first.
   */
  takeBatch(currentPolicyVersion: number): BatchGroup<E>[] | null {
    this.dropStale(currentPolicyVersion);
    if (!this.ready) return null;
    return this.complete.splice(0, this.config.batchTasks);
  }

  private ignoreReason(episode: E, currentPolicyVersion: number): Omit<EpisodeMark, 'episodeId' | 'groupId'> | null {
    if (episode.kind !== 'train') return { disposition: 'ignored-eval', detail: 'eval episodes are never trained on' };
    if (episode.outcome !== 'ended') return { disposition: 'ignored-aborted', detail: 'aborted episodes are never trained on' };
    if (episode.reward === null || !Number.isFinite(episode.reward)) {
      return { disposition: 'ignored-no-reward', detail: 'the episode ended without a finite reward' };
    }
    const lag = currentPolicyVersion - episode.policyVersion;
    if (lag > policyLagBound(this.config)) return staleMark(episode, currentPolicyVersion, policyLagBound(this.config));
    return null;
  }

  private closeGroup(groupId: string, queue: E[]): void {
    const episodes = queue.splice(0, this.config.groupSize);
    if (queue.length === 0) this.queues.delete(groupId);
    const rewards = episodes.map((e) => e.reward as number);
    if (this.config.excludeUniformGroups && rewards.every((r) => r === rewards[0])) {
      for (const e of episodes) {
        this.onMark({
          episodeId: e.episodeId,
          groupId,
          disposition: 'excluded-uniform-reward',
          detail: `every episode of group ${groupId} got reward ${rewards[0]}: zero advantage, nothing to learn`,
        });
      }
      return;
    }
    this.complete.push({ groupId, episodes });
  }

  private dropStale(currentPolicyVersion: number): void {
    const bound = policyLagBound(this.config);
    const isStale = (e: E) => currentPolicyVersion - e.policyVersion > bound;
    const drop = (e: E) => this.onMark({ episodeId: e.episodeId, groupId: e.groupId, ...staleMark(e, currentPolicyVersion, bound) });
    for (const [groupId, queue] of this.queues) {
      const fresh = queue.filter((e) => !isStale(e));
      queue.filter(isStale).forEach(drop);
      if (fresh.length === 0) this.queues.delete(groupId);
      else this.queues.set(groupId, fresh);
    }
    for (let i = this.complete.length - 1; i >= 0; i--) {
      if (!this.complete[i].episodes.some(isStale)) continue;
      this.complete.splice(i, 1)[0].episodes.forEach(drop);
    }
  }
}

function staleMark(episode: BatchEpisode, currentPolicyVersion: number, maxPolicyLag: number): Omit<EpisodeMark, 'episodeId' | 'groupId'> {
  return {
    disposition: 'dropped-stale',
    detail: `sampled under policy version ${episode.policyVersion}, now ${currentPolicyVersion}: more than ${maxPolicyLag} version(s) behind`,
  };
}
