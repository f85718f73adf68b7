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
 * Crash consistency (any crash, any moment): every acknowledged train episode is, after a restart, either trained
 * in exactly one standing step (the step's record names it) or marked with a reason. A step is committed in this
 * order: engine.trainStep → checkpoint (when due) → one store transaction (the step, its episodes, their `trained`
 * state) → the new policy version is published. So nothing is published that the store does not hold, and a crash
 * before the transaction leaves the episodes ended and unmarked: the queue is rebuilt from them on start (the
 * batcher lives in memory). Rows still `active` from the dead process are aborted (`peer_restarted`) when the loop
 * is built, at peer start.
 *
 * Resume is continuation: a checkpoint holds the weights, AdamW's moments and step count (the learning-rate
 * schedule's position), step and policy version, and says where the KL reference comes from (the weights training
 * started from: taken from the engine before the checkpoint's weights are loaded). When steps were recorded after
 * the latest checkpoint (a crash between checkpoints), their updates are lost with the process: those steps are
 * marked reverted, their episodes queued again, and the checkpoint's weights get a fresh policy version, never
 * one already used. Step numbers and policy versions never go backwards.
 */
import type { TrainStepSummary, ServerEvent } from '../../common/api.ts';
import type { Logger } from '../log.ts';
import type { EpisodeDone, HostedModel } from '../models/model-host.ts';
import { buildTrainBatch, type EpisodeForTraining } from './advantages.ts';
import { Batcher, type BatchGroup, type EpisodeMark } from './batcher.ts';
import { latestCheckpoint, listCheckpoints, readCheckpointOptimizer, readCheckpointWeights, removeCheckpoint, saveCheckpoint } from './checkpoints.ts';
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
  /**
   * Why the last checkpoint could not be written (the error's name, its system code such as ENOTDIR or EACCES when
   * it has one, and the step), null once one is written again. The steps since the last checkpoint are recorded
   * and served but not resumable: a crash would revert them (see resume). Training goes on, and every next step
   * tries the checkpoint again.
   */
  lastCheckpointError: CheckpointFailure | null;
  config: TrainingConfig;
}

export interface CheckpointFailure {
  step: number;
  name: string;
  code: string | null;
  message: string;
}

export class TrainingLoop {
  status: TrainingStatus = 'stopped';
  lastError: string | null = null;
  lastCheckpointError: CheckpointFailure | null = null;
  private readonly batcher: Batcher<EpisodeDone>;
  private unsubscribe: (() => void) | null = null;
  private resumed = false;
  /** The last recorded step when it has no checkpoint (stop() writes it). */
  private uncheckpointed: TrainStepSummary | null = null;
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
    this.unsubscribe ??= this.model.onEpisodeDone((done) => this.onEpisodeDone(done));
    if (this.stopSignal.signal.aborted) this.stopSignal = new AbortController();
    this.status = 'running';
    this.lastError = null;
    this.requeueFromStore();
    this.maybeStep();
  }

  /**
   * Offers the batcher every ended train episode the store holds untrained and unmarked: the queue of a run that
   * stopped or died, episodes that ended while the loop was stopped, and those of reverted steps. The batcher
   * ignores the ones it already has.
   */
  private requeueFromStore(): void {
    const { model, store } = this.options;
    for (const pending of store.pendingEpisodes(model.name)) {
      this.batcher.add({ ...pending, model: model.name, kind: 'train', outcome: 'ended' }, model.policyVersion);
    }
  }

  /** Keeps collecting finished episodes, starts no new step (a step under way completes). */
  pause(): void {
    if (this.status === 'running' || this.status === 'failed') this.status = 'paused';
  }

  /**
   * Stops collecting episodes; resolves once a step under way has completed and, when the last step has no
   * checkpoint yet, one is written: a clean stop never costs the steps since the last periodic checkpoint (a
   * restart would have to revert them). Not with checkpointEvery 0, which asks for no checkpoints at all.
   */
  async stop(): Promise<void> {
    if (this.status !== 'finished') this.status = 'stopped';
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.stopSignal.abort();
    await this.whenSettled();
    const unsaved = this.uncheckpointed;
    if (unsaved && this.options.config.checkpointEvery > 0 && (await this.maybeCheckpoint(unsaved, true))) this.uncheckpointed = null;
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
      lastCheckpointError: this.lastCheckpointError,
      config: this.options.config,
    };
  }

  /**
   * Continues the run where the last one left it (see the module comment): the store's history and the latest
   * checkpoint decide the weights, the optimizer state, the step counter and the policy version.
   */
  private async resume(): Promise<void> {
    const { model, store, log, config, checkpointDir } = this.options;
    const history = store.history(model.name);
    // One step can be caught between its checkpoint and its record: that checkpoint's update is not part of the run
    // (its episodes are still unmarked and will train again), so it must not be resumed from.
    for (const ahead of listCheckpoints(checkpointDir).filter((c) => c.meta.step === history.lastStep + 1)) {
      log.warn('removing the checkpoint of a step that was never recorded', { model: model.name, step: ahead.meta.step });
      removeCheckpoint(ahead.dir);
    }
    const checkpoint = latestCheckpoint(checkpointDir);
    const checkpointStep = checkpoint?.meta.step ?? 0;
    const step = Math.max(history.lastStep, checkpointStep, model.step);
    let policyVersion: number;
    if (history.standing && history.standing.step > checkpointStep) {
      // Steps recorded after the checkpoint lost their updates with the process. Their episodes go back to the
      // queue; the checkpoint's weights get a version never handed out, since the old numbers named other weights.
      policyVersion = Math.max(history.maxPolicyVersion, checkpoint?.meta.policyVersion ?? 0, model.policyVersion) + 1;
      const reverted = store.revertSteps(model.name, { policyVersion, checkpointStep, afterStep: step });
      log.warn('the steps after the latest checkpoint were lost; their episodes are queued again', {
        model: model.name,
        checkpointStep,
        lastStep: step,
        revertedSteps: reverted.steps,
        requeuedEpisodes: reverted.episodeIds.length,
        policyVersion,
      });
    } else if (history.restore && history.restore.checkpointStep === checkpointStep && history.restore.policyVersion > (history.standing?.policyVersion ?? 0)) {
      // Restored by an earlier restart, and nothing trained since: the same weights, the same version.
      policyVersion = history.restore.policyVersion;
    } else {
      policyVersion = checkpoint ? checkpoint.meta.policyVersion : model.policyVersion;
    }

    const loadedFromCheckpoint = checkpoint !== null && model.source.kind === 'hf' && model.source.path === checkpoint.dir;
    if (config.train.klCoef > 0) {
      // The KL term pulls towards the weights training started from: the configured source's, which the engine holds
      // until the checkpoint's are loaded. An engine started from the checkpoint itself no longer has them.
      if (loadedFromCheckpoint && checkpointStep > 0) log.warn('the engine was started from a checkpoint: the KL reference is that checkpoint, not the weights training started from', { model: model.name, checkpoint: checkpoint.dir });
      await model.engine.snapshotReference();
    }
    if (checkpoint && !loadedFromCheckpoint) {
      await model.engine.setWeights(await readCheckpointWeights(checkpoint.dir), policyVersion);
    } else if (policyVersion !== model.policyVersion) {
      // Stamp the restored weights with the continued version, so new calls carry it.
      await model.engine.setWeights(await model.engine.getWeights(), policyVersion);
    }
    if (checkpoint) {
      const optimizer = await readCheckpointOptimizer(checkpoint.dir);
      if (optimizer) await model.engine.setOptimizerState(optimizer);
      else log.warn('the checkpoint holds no optimizer state (written before checkpoints did): AdamW starts from zero moments', { model: model.name, checkpoint: checkpoint.dir });
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
    const step = model.step + 1;
    /** Set once the engine holds the update, and once the store holds the step. */
    let trainedVersion: number | null = null;
    let recorded = false;
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
      trainedVersion = metrics.policyVersion;
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
        revertedAt: null,
      };
      const last = config.maxSteps > 0 && step >= config.maxSteps;
      // Commit order (module comment): checkpoint, then the step's record, then the new version goes out.
      summary.checkpoint = await this.maybeCheckpoint(summary, last);
      this.options.store.recordStep(
        summary,
        trainBatch.advantages.map((a) => a.episodeId),
      );
      recorded = true;
      model.setPolicy(metrics.policyVersion, step);
      this.uncheckpointed = summary.checkpoint === null ? summary : null;
      if (last) this.status = 'finished';
      this.options.publish({ type: 'train-step', data: summary });
      log.info('train step', { model: model.name, step, policyVersion: summary.policyVersion, loss: metrics.loss, tokens: metrics.tokens, timeMs: metrics.timeMs });
    } catch (err) {
      const error = err as Error;
      this.status = 'failed';
      this.lastError = `${error.name}: ${error.message}`;
      log.error('train step failed', { model: model.name, step, error: this.lastError });
      // Recorded: the step stands (only what came after failed), its episodes are trained.
      if (recorded) return;
      // The engine holds an update the store does not: served under the engine's own version, never the old
      // number (a restart goes back to the last checkpoint, and the store's calls keep that version from reuse).
      if (trainedVersion !== null) model.setPolicy(trainedVersion, model.step);
      for (const group of batch ?? []) {
        this.record(group.episodes.map((e) => ({ episodeId: e.episodeId, groupId: group.groupId, disposition: 'dropped-step-failed', detail: `step ${step}: ${this.lastError ?? ''}`, step })));
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

  /**
   * Writes the checkpoint when one is due: every `checkpointEvery` steps, at the last step, and after a failed one
   * (each next step tries again). A failed write is not fatal: the step is recorded and served, `lastCheckpointError`
   * says why it is not resumable, and a crash before the next checkpoint reverts it (resume).
   */
  private async maybeCheckpoint(summary: TrainStepSummary, last: boolean): Promise<string | null> {
    const { checkpointEvery, train } = this.options.config;
    const due = (checkpointEvery > 0 && summary.step % checkpointEvery === 0) || last || this.lastCheckpointError !== null;
    if (!due) return null;
    try {
      const saved = await saveCheckpoint(this.model.engine, this.options.checkpointDir, {
        model: summary.model,
        step: summary.step,
        policyVersion: summary.policyVersion,
        time: summary.time,
        metrics: summary.metrics,
        reference: train.klCoef > 0 ? 'initial-weights' : null,
      });
      this.lastCheckpointError = null;
      return saved.dir;
    } catch (err) {
      const error = err as NodeJS.ErrnoException;
      this.lastCheckpointError = { step: summary.step, name: error.name, code: typeof error.code === 'string' ? error.code : null, message: error.message };
      this.options.log.error('checkpoint failed; the steps since the last checkpoint are not resumable', { model: summary.model, ...this.lastCheckpointError });
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
