/**
 * The training loop of one hosted model (docs/ARCHITECTURE.md, "Training loop").
 *
 *   rolling   finished train episodes go to the batcher (GRPO groups by task id)
 *   draining  a batch is ready: no new episodes start; the ones in flight finish (and queue for the next batch)
 *   updating  advantages → samples from the timelines stored at each episode's end (merged once, in the training
 *             mode; the merge view shows the same) → engine.trainStep (PPO-clip) → new policy version;
 *             the sampler uses the new weights at once (same engine); checkpoint every N steps
 *   rolling   again (or idle when nothing is in flight)
 *
 * Resume: on start the latest checkpoint's weights are loaded into the engine (unless the engine was started from
 * that very folder), and the step counter and policy version continue from the store and the checkpoint.
 */
import type { TrainStepSummary, ServerEvent } from '../../common/api.ts';
import type { Logger } from '../log.ts';
import type { EpisodeDone, HostedModel } from '../models/model-host.ts';
import { buildTrainBatch, type EpisodeForTraining } from './advantages.ts';
import { Batcher, type BatchGroup, type EpisodeMark } from './batcher.ts';
import { latestCheckpoint, readCheckpointWeights, saveCheckpoint } from './checkpoints.ts';
import type { TrainingConfig } from './config.ts';
import { EpisodeSamplesError, TrainingStateError } from './errors.ts';
import type { TrainingStore } from './store-port.ts';

/**
 * - stopped: finished episodes are not collected (the initial state).
 * - running: episodes are collected and a step runs whenever a batch is ready.
 * - paused: episodes are still collected, no step starts.
 * - finished: maxSteps reached.
 * - failed: the last step threw; `lastError` says why. Start again to continue.
 */
export type TrainingStatus = 'stopped' | 'running' | 'paused' | 'finished' | 'failed';

export interface TrainingLoopOptions {
  model: HostedModel;
  config: TrainingConfig;
  store: TrainingStore;
  /** `<dataDir>/checkpoints/<model>` (checkpointsDir()). */
  checkpointDir: string;
  log: Logger;
  publish: (event: ServerEvent) => void;
}

export interface TrainingLoopState {
  model: string;
  status: TrainingStatus;
  step: number;
  policyVersion: number;
  engineState: HostedModel['state'];
  queuedEpisodes: number;
  completeGroups: number;
  lastError: string | null;
  config: TrainingConfig;
}

export class TrainingLoop {
  status: TrainingStatus = 'stopped';
  lastError: string | null = null;
  private readonly batcher: Batcher<EpisodeDone>;
  private unsubscribe: (() => void) | null = null;
  private resumed = false;
  private referenceTaken = false;
  private stepping: Promise<void> | null = null;
  /** Aborted by stop(): a step still draining gives up (its batch stays queued) instead of holding the stop. */
  private stopSignal = new AbortController();

  constructor(private readonly options: TrainingLoopOptions) {
    this.batcher = new Batcher<EpisodeDone>(options.config, (mark) => this.record([mark]));
  }

  get model(): HostedModel {
    return this.options.model;
  }

  /** Starts (or resumes after pause / failure) collecting episodes and stepping. */
  async start(): Promise<void> {
    if (this.maxStepsReached()) {
      this.status = 'finished';
      throw new TrainingStateError(`model "${this.model.name}" already did its ${this.options.config.maxSteps} steps (maxSteps)`);
    }
    if (!this.resumed) await this.resume();
    if (this.options.config.train.klCoef > 0 && !this.referenceTaken) {
      // The KL term pulls towards the weights training started from.
      await this.model.engine.snapshotReference();
      this.referenceTaken = true;
    }
    this.unsubscribe ??= this.model.onEpisodeDone((done) => this.onEpisodeDone(done));
    if (this.stopSignal.signal.aborted) this.stopSignal = new AbortController();
    this.status = 'running';
    this.lastError = null;
    this.maybeStep();
  }

  /** Keeps collecting finished episodes, starts no new step (a step under way completes). */
  pause(): void {
    if (this.status === 'running' || this.status === 'failed') this.status = 'paused';
  }

  /** Stops collecting episodes; resolves once a step under way has completed. */
  async stop(): Promise<void> {
    if (this.status !== 'finished') this.status = 'stopped';
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.stopSignal.abort();
    await this.whenSettled();
  }

  /** Resolves when no step is running (the next may start right after). */
  async whenSettled(): Promise<void> {
    while (this.stepping) await this.stepping;
  }

  state(): TrainingLoopState {
    const counts = this.batcher.counts();
    return {
      model: this.model.name,
      status: this.status,
      step: this.model.step,
      policyVersion: this.model.policyVersion,
      engineState: this.model.state,
      queuedEpisodes: counts.queuedEpisodes,
      completeGroups: counts.completeGroups,
      lastError: this.lastError,
      config: this.options.config,
    };
  }

  /**
   * Continues the counters where the last run left them. Step and policy version never go backwards: when the
   * store recorded steps after the latest checkpoint (a crash between checkpoints), the weights are the
   * checkpoint's but the counters continue after the last recorded step, so no version number is reused.
   */
  private async resume(): Promise<void> {
    const { model, store, log } = this.options;
    const stored = store.lastStep(model.name);
    const checkpoint = latestCheckpoint(this.options.checkpointDir);
    const step = Math.max(stored?.step ?? 0, checkpoint?.meta.step ?? 0, model.step);
    const policyVersion = Math.max(stored?.policyVersion ?? 0, checkpoint?.meta.policyVersion ?? 0, model.policyVersion);
    if (checkpoint && stored && checkpoint.meta.step < stored.step) {
      log.warn('latest checkpoint is older than the last recorded step; continuing from its weights', {
        model: model.name,
        checkpointStep: checkpoint.meta.step,
        lastStep: stored.step,
      });
    }
    const loadedFromCheckpoint = checkpoint !== null && model.source.kind === 'hf' && model.source.path === checkpoint.dir;
    if (checkpoint && !loadedFromCheckpoint) {
      await model.engine.setWeights(await readCheckpointWeights(checkpoint.dir), policyVersion);
    } else if (policyVersion !== model.policyVersion) {
      // Stamp the restored weights with the continued version, so new calls carry it.
      await model.engine.setWeights(await model.engine.getWeights(), policyVersion);
    }
    model.setPolicy(policyVersion, step);
    this.resumed = true;
    if (step > 0) log.info('training resumed', { model: model.name, step, policyVersion, checkpoint: checkpoint?.dir ?? null });
  }

  private onEpisodeDone(done: EpisodeDone): void {
    if (this.status === 'stopped' || this.status === 'finished') return;
    this.batcher.add(done, this.model.policyVersion);
    this.maybeStep();
  }

  private maybeStep(): void {
    if (this.status !== 'running' || this.stepping || !this.batcher.ready || this.maxStepsReached()) return;
    this.stepping = this.runStep().finally(() => {
      this.stepping = null;
      this.maybeStep();
    });
  }

  private maxStepsReached(): boolean {
    const { maxSteps } = this.options.config;
    return maxSteps > 0 && this.model.step >= maxSteps;
  }

  private async runStep(): Promise<void> {
    const { model, config, log } = this.options;
    let batch: BatchGroup<EpisodeDone>[] | null = null;
    try {
      if (!(await this.drainUnlessStopped())) return;
      model.setState('updating');
      // Taken after draining: the episodes that finished meanwhile may complete more groups.
      batch = this.batcher.takeBatch(model.policyVersion);
      if (!batch) return;
      const groups = this.loadGroups(batch);
      const trainBatch = buildTrainBatch(groups, config.advantageEpsilon);
      // Divided by the episode count, not the sample count: merged and naive packings give the same update.
      const metrics = await model.engine.trainStep(trainBatch.samples, { ...config.train, lossDivisor: trainBatch.advantages.length });
      const step = model.step + 1;
      model.setPolicy(metrics.policyVersion, step);
      const { policyVersion: _version, ...stepMetrics } = metrics;
      const rewards = trainBatch.advantages.map((a) => a.reward);
      const rewardMean = mean(rewards);
      const summary: TrainStepSummary = {
        model: model.name,
        step,
        policyVersion: metrics.policyVersion,
        time: new Date().toISOString(),
        groups: batch.length,
        episodes: trainBatch.advantages.length,
        samples: trainBatch.samples.length,
        rewardMean,
        rewardStd: Math.sqrt(mean(rewards.map((r) => (r - rewardMean) ** 2))),
        successRate: successRate(groups.flatMap((g) => g.episodes)),
        naiveTokens: groups.reduce((sum, g) => sum + g.episodes.reduce((a, e) => a + e.naiveTokens, 0), 0),
        metrics: stepMetrics,
        checkpoint: null,
      };
      if (this.maxStepsReached()) this.status = 'finished';
      summary.checkpoint = await this.maybeCheckpoint(summary);
      this.options.store.insertStep(summary);
      this.record(trainBatch.advantages.map((a) => ({ episodeId: a.episodeId, groupId: a.groupId, disposition: 'trained', detail: `advantage ${a.advantage.toFixed(4)}`, step })));
      this.options.publish({ type: 'train-step', data: summary });
      log.info('train step', { model: model.name, step, policyVersion: summary.policyVersion, loss: metrics.loss, tokens: metrics.tokens, timeMs: metrics.timeMs });
    } catch (err) {
      const error = err as Error;
      this.status = 'failed';
      this.lastError = `${error.name}: ${error.message}`;
      log.error('train step failed', { model: model.name, error: this.lastError });
      for (const group of batch ?? []) {
        this.record(group.episodes.map((e) => ({ episodeId: e.episodeId, groupId: group.groupId, disposition: 'dropped-step-failed', detail: this.lastError ?? '', step: model.step + 1 })));
      }
    } finally {
      model.resume();
    }
  }

  /** Drains the model; false when stop() came first (the model then resumes, the batch waits). */
  private drainUnlessStopped(): Promise<boolean> {
    const { signal } = this.stopSignal;
    if (signal.aborted) return Promise.resolve(false);
    let onAbort = () => {};
    const stopped = new Promise<boolean>((resolve) => {
      onAbort = () => resolve(false);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    // The signal lives as long as the loop: a listener left behind per step would pile up for the whole run.
    return Promise.race([this.model.drain().then(() => true), stopped]).finally(() => signal.removeEventListener('abort', onAbort));
  }

  /**
   * The batch's episodes with the timelines stored at their end (never merged again: what is trained on is what
   * was stored and what the merge view shows), what one sample per call would have cost, and their success flags.
   */
  private loadGroups(batch: BatchGroup<EpisodeDone>[]): Array<{ groupId: string; episodes: LoadedEpisode[] }> {
    const { store, config, log } = this.options;
    return batch.map((group) => ({
      groupId: group.groupId,
      episodes: group.episodes.map((episode) => {
        const stored = store.episodeTimelines(episode.episodeId);
        if (!stored) throw new EpisodeSamplesError(`episode ${episode.episodeId} has no stored timelines`, episode.episodeId);
        if (stored.mode !== config.mergeMode) {
          // Ended under another setting (e.g. before a restart with a new mergeMode): still trained as stored.
          log.warn('episode was merged in another mode than training uses', { episodeId: episode.episodeId, stored: stored.mode, training: config.mergeMode });
        }
        return { episodeId: episode.episodeId, reward: episode.reward as number, timelines: stored.timelines, naiveTokens: stored.naiveTokens, success: stored.success };
      }),
    }));
  }

  private async maybeCheckpoint(summary: TrainStepSummary): Promise<string | null> {
    const { checkpointEvery } = this.options.config;
    const due = (checkpointEvery > 0 && summary.step % checkpointEvery === 0) || this.status === 'finished';
    if (!due) return null;
    try {
      const saved = await saveCheckpoint(this.model.engine, this.options.checkpointDir, {
        model: summary.model,
        step: summary.step,
        policyVersion: summary.policyVersion,
        time: summary.time,
        metrics: summary.metrics,
      });
      return saved.dir;
    } catch (err) {
      // The step itself succeeded; a failed save only costs resumability, and the next checkpoint retries.
      this.options.log.error('checkpoint failed', { model: summary.model, step: summary.step, error: String(err) });
      return null;
    }
  }

  private record(marks: EpisodeMark[]): void {
    if (marks.length > 0) this.options.store.markEpisodes(marks);
  }
}

type LoadedEpisode = EpisodeForTraining & { naiveTokens: number; success: boolean | null };

/**
 * Share of the episodes whose own success flag is true; an episode without a flag counts as not successful,
 * unless none has one (then null: the agent does not report success, and reward is not taken for it).
 */
function successRate(episodes: readonly Pick<LoadedEpisode, 'success'>[]): number | null {
  if (!episodes.some((e) => e.success !== null)) return null;
  return episodes.filter((e) => e.success === true).length / episodes.length;
}

function mean(values: number[]): number {
  return values.length === 0 ? 0 : values.reduce((s, v) => s + v, 0) / values.length;
}
