/**
 * The training loop of one hosted model (docs/ARCHITECTURE.md, "Training loop").
 *
 *   rolling   finished train episodes go to the batcher (GRPO groups by task id)
 *   draining  a batch is ready: no new episodes start; the ones in flight finish (and queue for the next batch)
 *   updating  advantages → samples from the timelines stored at each episode's end (merged once, in the training
 *             mode; the merge view shows the same) → engine.trainStep (PPO-clip) → new policy version;
 *             the sampler uses the new weights at once (the same engine, or a separate sampler engine given the
 *             trainer's weights); checkpoint every N steps
 *   rolling   again (or idle when nothing is in flight)
 *
 * Asynchronous training (`staleness` η ≥ 1) leaves out draining and updating: the step runs while episodes keep
 * going — on a separate sampler engine (the `sampler` setting; the default then), calls go on during the update and
 * switch to the new weights when the sampler takes them; on a shared engine the calls under way finish and new ones
 * wait for the update. Either way they continue on the new weights (partial rollouts, each call tagged with its
 * version); episodes more than η versions old are stale
 * (batcher.ts), and an admission gate keeps the train episodes in flight and queued within η + 1 batches.
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
import type { RunEventKind, RunStatus, RunWarning } from '../../common/runs-api.ts';
import type { TrainingRunRow } from '../store/training-runs.ts';
import type { Logger } from '../log.ts';
import type { EpisodeDone, HostedModel } from '../models/model-host.ts';
import { buildTrainBatch, type EpisodeForTraining } from './advantages.ts';
import { Batcher, type BatchGroup, type EpisodeMark } from './batcher.ts';
import { latestCheckpoint, listCheckpoints, readCheckpointOptimizer, readCheckpointWeights, removeCheckpoint, saveCheckpoint } from './checkpoints.ts';
import { parseTrainingOverrides, resolveTrainingConfig, type TrainingConfig } from './config.ts';
import { EpisodeSamplesError, TrainingConfigError, TrainingStateError } from './errors.ts';
import { configChanges, configHash, describeChanges } from './run-config.ts';
import { openRun } from './run-lifecycle.ts';
import { DiscardedGroups } from './discarded-groups.ts';
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
  /** The model's source as text (part of the run's identity: another source is another run). */
  source: string;
  /** Start a new run from the source weights (`--new-run`), and the name to give a new run. */
  run?: { fresh?: boolean; name?: string };
  /** The run was created or its status, configuration, events or warnings changed. */
  runChanged?: (run: TrainingRunRow) => void;
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
  /** The run this loop trains (null before its first start). */
  runId: string | null;
  /** The run's step (model step − the run's offset). */
  runStep: number;
  warnings: RunWarning[];
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
  /** The settings in force: a copy, since a live change (updateConfig) replaces them between steps. */
  private readonly config: TrainingConfig;
  private run: TrainingRunRow | null = null;
  private warnings: RunWarning[] = [];
  /** Groups left out as uniform: the step's count and the run's warning. */
  private readonly discarded = new DiscardedGroups();
  /** When the rollout phase of the next step began (the previous step's end, or the start). */
  private rolloutSince = performance.now();
  /** The model's sampler busy time then (model-host.ts samplerBusyMs), for the step's sampler busy share. */
  private samplerBusySince = 0;
  /** Episodes dropped as stale since the last step (reported with the next one). */
  private staleSinceStep = 0;

  constructor(private readonly options: TrainingLoopOptions) {
    this.config = structuredClone(options.config);
    this.batcher = new Batcher<EpisodeDone>(this.config, (mark) => this.onMark(mark));
  }

  get model(): HostedModel {
    return this.options.model;
  }

  /** Starts (or resumes after pause / failure) collecting episodes and stepping. */
  async start(): Promise<void> {
    if (!this.resumed) await this.resume();
    if (this.maxStepsReached()) {
      this.setStatus('finished');
      throw new TrainingStateError(`run "${this.run?.name}" of model "${this.model.name}" already did its ${this.config.maxSteps} steps (maxSteps); start the peer with --new-run or a higher --max-steps`);
    }
    this.unsubscribe ??= this.subscribe();
    if (this.stopSignal.signal.aborted) this.stopSignal = new AbortController();
    this.lastError = null;
    this.markStepEnd();
    this.setStatus('running');
    this.requeueFromStore();
    this.maybeStep();
  }

  /** The loop's hold on the model: its finished episodes, and the admission gate of asynchronous training. */
  private subscribe(): () => void {
    const offDone = this.model.onEpisodeDone((done) => this.onEpisodeDone(done));
    const offGate = this.model.setAdmissionGate(() => this.admissionRefusal());
    return () => {
      offDone();
      offGate();
    };
  }

  /**
   * AReaL's rule in the form the loop can count: admit a train episode while those in flight and queued fit η + 1
   * batches, so that each is trained within η versions of the one it begins under (those that are not — their group
   * filled late — are dropped as stale, with the reason). Synchronous training admits freely (its drain bounds lag).
   */
  private admissionRefusal(): string | null {
    const { staleness, batchTasks, groupSize } = this.config;
    if (staleness === 0 || this.status !== 'running') return null;
    const bound = (staleness + 1) * batchTasks * groupSize;
    const counts = this.batcher.counts();
    const pending = this.model.activeTrainEpisodes + counts.queuedEpisodes + counts.completeGroups * groupSize;
    return pending >= bound ? `${pending} train episodes in flight or queued reach the staleness bound η = ${staleness} (${staleness + 1} batches of ${batchTasks * groupSize})` : null;
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
    if (this.status === 'running' || this.status === 'failed') this.setStatus('paused');
  }

  /**
   * Stops collecting episodes; resolves once a step under way has completed and, when the last step has no
   * checkpoint yet, one is written: a clean stop never costs the steps since the last periodic checkpoint (a
   * restart would have to revert them). Not with checkpointEvery 0, which asks for no checkpoints at all.
   */
  async stop(): Promise<void> {
    if (this.status !== 'finished') this.setStatus('stopped');
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.stopSignal.abort();
    await this.whenSettled();
    const unsaved = this.uncheckpointed;
    if (unsaved && this.config.checkpointEvery > 0 && (await this.maybeCheckpoint(unsaved, true))) this.uncheckpointed = null;
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
      config: this.config,
      runId: this.run?.id ?? null,
      runStep: this.stepOfRun(),
      warnings: this.warnings,
    };
  }

  /** The settings in force (a live change replaces them between steps). */
  get settings(): Readonly<TrainingConfig> {
    return this.config;
  }

  /** The run this loop trains, null before its first start. */
  currentRun(): TrainingRunRow | null {
    return this.run;
  }

  /**
   * Changes settings while the run trains, from the next step on, recorded as a `config-change` event on its curve.
   * Settings fixed when the engine or the run began (mergeMode, lora, seed, sampler) cannot change: TrainingConfigError.
   * Returns the settings now in force.
   */
  updateConfig(overrides: unknown): TrainingConfig {
    const parsed = parseTrainingOverrides(overrides);
    for (const fixed of FIXED_KEYS) {
      if (parsed[fixed] !== undefined) throw new TrainingConfigError(`${fixed}: fixed for the run (its episodes or engine depend on it); start the peer with the new value to begin a new run`, fixed);
    }
    const next = resolveTrainingConfig(parsed, this.config);
    const changes = configChanges(this.config as unknown as Record<string, unknown>, next as unknown as Record<string, unknown>);
    if (changes.length === 0) return this.config;
    Object.assign(this.config, next);
    const run = this.run;
    if (run) {
      const { store } = this.options;
      run.config = structuredClone(this.config) as unknown as Record<string, unknown>;
      run.configHash = configHash(this.config, this.options.source);
      store.runs.setConfig(run.id, run.config, run.configHash);
      store.runs.addEvent({ runId: run.id, kind: 'config-change', step: this.stepOfRun(), label: describeChanges(changes), detail: { changes }, time: new Date().toISOString() });
      this.options.runChanged?.(run);
    }
    this.options.log.info('training settings changed', { model: this.model.name, changes });
    // A larger bound (staleness, batch size) may admit held begins now.
    this.model.reopenAdmissions();
    this.maybeStep();
    return this.config;
  }

  private stepOfRun(): number {
    return this.model.step - (this.run?.stepOffset ?? 0);
  }

  private setStatus(status: TrainingStatus): void {
    const changed = status !== this.status;
    this.status = status;
    // Only a running loop bounds admission (admissionRefusal).
    if (changed) this.model.reopenAdmissions();
    const run = this.run;
    if (!run || !changed) return;
    const runStatus: RunStatus = status;
    run.status = runStatus;
    this.options.store.runs.setStatus(run.id, runStatus);
    const event = ENDING_EVENTS[status];
    if (event) {
      const label = status === 'finished' ? `finished: ${this.config.maxSteps} steps` : status === 'failed' ? (this.lastError ?? 'failed') : 'stopped';
      this.options.store.runs.addEvent({ runId: run.id, kind: event, step: this.stepOfRun(), label, detail: {}, time: new Date().toISOString() });
    }
    this.options.runChanged?.(run);
  }

  /** Counts groups left out as uniform (the discarded-share metric and warning), then records the mark. */
  private onMark(mark: EpisodeMark): void {
    if (mark.disposition === 'excluded-uniform-reward' && this.discarded.add(mark.groupId)) this.updateWarnings();
    if (mark.disposition === 'dropped-stale') this.staleSinceStep += 1;
    this.record([mark]);
  }

  /** Recomputes the run's warnings; writes and announces them when they changed. */
  private updateWarnings(): void {
    const warnings: RunWarning[] = [];
    const discarded = this.discarded.warning();
    if (discarded) warnings.push(discarded);
    if (this.lastCheckpointError) {
      warnings.push({ code: 'checkpoint_failing', message: `checkpoints fail (${this.lastCheckpointError.code ?? this.lastCheckpointError.name}): the steps since the last one would be lost in a crash` });
    }
    if (JSON.stringify(warnings) === JSON.stringify(this.warnings)) return;
    this.warnings = warnings;
    const run = this.run;
    if (run) {
      run.warnings = warnings;
      this.options.store.runs.setWarnings(run.id, warnings);
      this.options.runChanged?.(run);
    }
  }

  /**
   * Continues the run where the last one left it (see the module comment): the store's history and the latest
   * checkpoint decide the weights, the optimizer state, the step counter and the policy version.
   */
  private async resume(): Promise<void> {
    const { model, store, log, checkpointDir } = this.options;
    const config = this.config;
    const lastStep = store.history(model.name).lastStep;
    // One step can be caught between its checkpoint and its record: that checkpoint's update is not part of the run
    // (its episodes are still unmarked and will train again), so it must not be resumed from.
    for (const ahead of listCheckpoints(checkpointDir).filter((c) => c.meta.step === lastStep + 1)) {
      log.warn('removing the checkpoint of a step that was never recorded', { model: model.name, step: ahead.meta.step });
      removeCheckpoint(ahead.dir);
    }
    const opened = openRun(store, {
      model: model.name,
      source: this.options.source,
      config,
      fresh: this.options.run?.fresh ?? false,
      name: this.options.run?.name,
      lastModelStep: Math.max(lastStep, model.step),
      latestCheckpointStep: latestCheckpoint(checkpointDir)?.meta.step ?? null,
    });
    const run = opened.run;
    this.run = run;
    // The run's weights come from its own lineage: checkpoints after its offset (a fresh run's offset is the last step
    // before it, so earlier runs' checkpoints are not its own), else the source weights at the offset.
    const offset = run.stepOffset;
    if (opened.created && run.start.kind === 'source' && offset > 0) {
      // The source weights come back under a version never handed out: the old numbers named other weights.
      const fresh = store.history(model.name, offset);
      store.revertSteps(model.name, { policyVersion: Math.max(fresh.maxPolicyVersion, model.policyVersion) + 1, checkpointStep: offset, afterStep: offset });
    }
    const history = store.history(model.name, offset);
    const checkpoint = latestCheckpoint(checkpointDir, offset);
    const checkpointStep = checkpoint?.meta.step ?? offset;
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
      await model.syncSampler(policyVersion);
    } else if (policyVersion !== model.policyVersion) {
      // Stamp the restored weights with the continued version, so new calls carry it.
      await model.engine.setWeights(await model.engine.getWeights(), policyVersion);
      await model.syncSampler(policyVersion);
    }
    if (checkpoint) {
      const optimizer = await readCheckpointOptimizer(checkpoint.dir);
      if (optimizer) await model.engine.setOptimizerState(optimizer);
      else log.warn('the checkpoint holds no optimizer state (written before checkpoints did): AdamW starts from zero moments', { model: model.name, checkpoint: checkpoint.dir });
    }
    model.setPolicy(policyVersion, step);
    this.resumed = true;
    this.options.runChanged?.(run);
    log.info(opened.created ? 'training run started' : 'training run resumed', { model: model.name, run: run.id, step, policyVersion, checkpoint: checkpoint?.dir ?? null });
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
    const { maxSteps } = this.config;
    return maxSteps > 0 && this.stepOfRun() >= maxSteps;
  }

  private async runStep(): Promise<void> {
    const { model, log } = this.options;
    const config = this.config;
    let batch: BatchGroup<EpisodeDone>[] | null = null;
    const step = model.step + 1;
    /** Set once the engine holds the update, and once the store holds the step. */
    let trainedVersion: number | null = null;
    let recorded = false;
    const rolloutMs = performance.now() - this.rolloutSince;
    const drainStarted = performance.now();
    const asynchronous = config.staleness > 0;
    try {
      if (!asynchronous && !(await this.drainUnlessStopped())) return;
      const drainMs = performance.now() - drainStarted;
      const updateStarted = performance.now();
      if (!asynchronous) model.setState('updating');
      // Taken after draining: the episodes that finished meanwhile may complete more groups.
      batch = this.batcher.takeBatch(model.policyVersion);
      // The batch (and any stale episodes dropped with it) no longer counts against the bound: held begins go in.
      model.reopenAdmissions();
      if (!batch) return;
      const groups = this.loadGroups(batch);
      const trainBatch = buildTrainBatch(groups, config.advantageEpsilon);
      // Divided by the episode count, not the sample count: merged and naive packings give the same update.
      const metrics = await model.engine.trainStep(trainBatch.samples, { ...config.train, lossDivisor: trainBatch.advantages.length });
      trainedVersion = metrics.policyVersion;
      const { policyVersion: _version, ...stepMetrics } = metrics;
      const rewards = trainBatch.advantages.map((a) => a.reward);
      const rewardMean = mean(rewards);
      const lags = batch.flatMap((g) => g.episodes.map((e) => Math.max(0, model.policyVersion - e.policyVersion)));
      const discardedGroups = this.discarded.count;
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
        discardedGroups,
        discardedShare: discardedGroups / (discardedGroups + batch.length),
        responseTokensMean: metrics.trainedTokens / Math.max(1, trainBatch.advantages.length),
        policyLagMean: mean(lags),
        policyLagMax: lags.length ? Math.max(...lags) : 0,
        droppedStale: this.staleSinceStep,
        rolloutTokensPerS: rolloutMs > 0 ? metrics.trainedTokens / (rolloutMs / 1000) : 0,
        phases: { rolloutMs, drainMs, updateMs: 0 },
        runId: this.run?.id ?? null,
      };
      const last = config.maxSteps > 0 && step - (this.run?.stepOffset ?? 0) >= config.maxSteps;
      // Commit order (module comment): checkpoint, then the step's record, then the new version goes out.
      summary.checkpoint = await this.maybeCheckpoint(summary, last);
      summary.phases = { rolloutMs, drainMs, updateMs: performance.now() - updateStarted };
      summary.samplerBusyShare = Math.min(1, (model.samplerBusyMs - this.samplerBusySince) / Math.max(1, rolloutMs + drainMs + summary.phases.updateMs));
      this.options.store.recordStep(
        summary,
        trainBatch.advantages.map((a) => a.episodeId),
      );
      recorded = true;
      this.staleSinceStep = 0;
      await model.syncSampler(metrics.policyVersion);
      model.setPolicy(metrics.policyVersion, step);
      this.uncheckpointed = summary.checkpoint === null ? summary : null;
      this.discarded.stepDone(batch.length);
      this.updateWarnings();
      if (last) this.setStatus('finished');
      this.options.publish({ type: 'train-step', data: summary });
      // The run's totals moved with the step: the runs list and run pages update from this, not by polling.
      if (this.run && !last) this.options.runChanged?.(this.run);
      log.info('train step', { model: model.name, step, policyVersion: summary.policyVersion, loss: metrics.loss, tokens: metrics.tokens, timeMs: metrics.timeMs });
    } catch (err) {
      const error = err as Error;
      this.lastError = `${error.name}: ${error.message}`;
      this.setStatus('failed');
      log.error('train step failed', { model: model.name, step, error: this.lastError });
      // Recorded: the step stands (only what came after failed), its episodes are trained.
      if (recorded) return;
      // The engine holds an update the store does not: served under the engine's own version, never the old
      // number (a restart goes back to the last checkpoint, and the store's calls keep that version from reuse).
      if (trainedVersion !== null) {
        await model.syncSampler(trainedVersion).catch((syncError: Error) => log.error('the sampler kept the weights before the failed step', { model: model.name, error: `${syncError.name}: ${syncError.message}` }));
        model.setPolicy(trainedVersion, model.step);
      }
      for (const group of batch ?? []) {
        this.record(group.episodes.map((e) => ({ episodeId: e.episodeId, groupId: group.groupId, disposition: 'dropped-step-failed', detail: `step ${step}: ${this.lastError ?? ''}`, step })));
      }
    } finally {
      this.markStepEnd();
      if (!asynchronous) model.resume();
    }
  }

  /** Where the next step's phases and sampler busy share are measured from. */
  private markStepEnd(): void {
    this.rolloutSince = performance.now();
    this.samplerBusySince = this.model.samplerBusyMs;
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
    const { store, log } = this.options;
    const config = this.config;
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
    const { checkpointEvery, train } = this.config;
    const runStep = summary.step - (this.run?.stepOffset ?? 0);
    const due = (checkpointEvery > 0 && runStep % checkpointEvery === 0) || last || this.lastCheckpointError !== null;
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

/** The statuses that end a stretch of training, and the event each leaves on the run's curve. */
const ENDING_EVENTS: Partial<Record<TrainingStatus, RunEventKind>> = { stopped: 'stop', finished: 'finish', failed: 'fail' };
/**
 * Settings a live change may not touch: stored episodes were merged in mergeMode, the engine started with lora and
 * seed, and with or without a sampler engine of its own.
 */
const FIXED_KEYS = ['mergeMode', 'lora', 'seed', 'sampler'] as const;

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
