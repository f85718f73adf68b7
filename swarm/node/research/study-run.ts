/**
 * One run of a study: a peer of its own (its own data dir, store and engine thread) hosting the arm's model with the
 * arm's training settings, the arm's agent attached to the train tasks until the run has done its steps, then every
 * held-out task once on the final weights. The guardian watches it while it trains (no first step in time, a stalled
 * step, the run's wall-time cap, NaN loss, KL blow-up, reward collapse, no progress) and stops it with the reason.
 *
 * Everything the study reports is read back from the run's own store afterwards (run-metrics.ts), so a report can
 * always be recomputed from the runs it links to. A run started again in the same folder continues its training run
 * (same settings: the run lifecycle resumes it from its last checkpoint; more steps: a continued run, for successive
 * halving's promotions).
 */
import type { Database } from 'better-sqlite3';
import type { AttachClientRequest } from '../../common/runner-api.ts';
import type { RunStep } from '../../common/api.ts';
import { listRunSteps } from '../store/training-runs.ts';
import type { ClientRunner } from '../runner/runner.ts';
import type { TrainingConfigOverrides } from '../training/config.ts';
import type { TrainingLoop } from '../training/loop.ts';
import type { ModelSource } from '../../../worker/common/engine.ts';

/** The name the run's model is hosted under in its own peer. */
export const RUN_MODEL = 'policy';
/** How often the guardian looks at a training run. */
const WATCH_INTERVAL_MS = 500;
/** Steps read per look: far more than a run makes in half a second. */
const MAX_STEPS_PER_LOOK = 1000;

/** What a study run needs of the peer it trains on (a PeerRuntime is one). */
export interface RunPeer {
  readonly db: Database;
  readonly runner: ClientRunner;
  readonly training: { loop(name: string): TrainingLoop };
  stop(): Promise<void>;
}

export interface RunPeerOptions {
  dataDir: string;
  source: ModelSource;
  training: TrainingConfigOverrides;
}

/** Starts the peer a run trains on; the research service is given it by the runtime that composes both. */
export type StartRunPeer = (options: RunPeerOptions) => Promise<RunPeer>;

export interface StudyRunPlan {
  dataDir: string;
  source: ModelSource;
  /** The arm's resolved overrides; maxSteps, seed and checkpointEvery are set by the study. */
  training: TrainingConfigOverrides;
  script: string;
  reward?: string;
  trainTasks: string;
  evalTasks: string;
  evalConcurrency: number;
  evalTemperature: number;
  groupSize: number;
  batchTasks: number;
}

export interface GuardRules {
  firstStepMs: number;
  stepMs: number;
  runWallMs: number;
  nanLoss: boolean;
  maxKl: number | null;
  rewardCollapse: { below: number; steps: number } | null;
  noProgressSteps: number | null;
}

/** How a run ended: trained and evaluated, stopped early by a rule (kept, with its reason), or failed. */
export type StudyRunEnd =
  | { outcome: 'done' }
  | { outcome: 'stopped'; reason: string }
  | { outcome: 'failed'; reason: string; retryable: boolean };

export interface StudyRunProgress {
  runStep: number;
  phase: 'training' | 'evaluating';
}

/** Runs the plan to its end; `signal` stops it (the study was stopped or the peer is stopping). */
export async function executeStudyRun(
  startPeer: StartRunPeer,
  plan: StudyRunPlan,
  rules: GuardRules,
  signal: AbortSignal,
  onProgress: (progress: StudyRunProgress) => void = () => {},
): Promise<StudyRunEnd> {
  const peer = await startPeer({ dataDir: plan.dataDir, source: plan.source, training: plan.training });
  try {
    const trained = await train(peer, plan, rules, signal, onProgress);
    if (trained.outcome !== 'done') return trained;
    onProgress({ runStep: peer.training.loop(RUN_MODEL).state().runStep, phase: 'evaluating' });
    return await evaluate(peer, plan, signal);
  } finally {
    await peer.stop();
  }
}

const attachBase = (plan: StudyRunPlan): Pick<AttachClientRequest, 'script' | 'model' | 'rewardModule'> => ({
  script: { path: plan.script },
  model: RUN_MODEL,
  ...(plan.reward ? { rewardModule: plan.reward } : {}),
});

/** Trains until the loop has done the run's steps, or a rule stops it. */
async function train(peer: RunPeer, plan: StudyRunPlan, rules: GuardRules, signal: AbortSignal, onProgress: (p: StudyRunProgress) => void): Promise<StudyRunEnd> {
  const loop = peer.training.loop(RUN_MODEL);
  if (loop.state().status === 'finished') return { outcome: 'done' };
  await peer.runner.attach({
    ...attachBase(plan),
    name: 'train',
    tasks: { path: plan.trainTasks },
    repeat: plan.groupSize,
    concurrency: plan.batchTasks * plan.groupSize,
    retries: 0,
    maxConsecutiveFailures: 1000,
  });
  const guard = new RunGuard(rules, loop.state().runStep);
  try {
    for (;;) {
      await sleep(WATCH_INTERVAL_MS, signal);
      if (signal.aborted) return { outcome: 'failed', reason: 'interrupted', retryable: true };
      const state = loop.state();
      if (state.status === 'finished') return { outcome: 'done' };
      if (state.status === 'failed') return { outcome: 'failed', reason: `training failed: ${state.lastError}`, retryable: true };
      const client = peer.runner.get('train');
      if (client.state === 'broken') return { outcome: 'failed', reason: `the agent script keeps failing: ${client.reason ?? 'unknown'}`, retryable: false };
      const verdict = guard.check(newSteps(peer, loop, guard.seenStep));
      if (verdict) return verdict;
      onProgress({ runStep: state.runStep, phase: 'training' });
    }
  } finally {
    await peer.runner.detach('train', { abortInFlight: true });
  }
}

/** Steps the run recorded after `afterRunStep`, oldest first. */
function newSteps(peer: RunPeer, loop: TrainingLoop, afterRunStep: number): RunStep[] {
  const run = loop.currentRun();
  return run ? listRunSteps(peer.db, run, { afterRunStep, limit: MAX_STEPS_PER_LOOK }) : [];
}

/** Every held-out task once, on the final weights. */
async function evaluate(peer: RunPeer, plan: StudyRunPlan, signal: AbortSignal): Promise<StudyRunEnd> {
  await peer.runner.attach({
    ...attachBase(plan),
    name: 'final-eval',
    tasks: { path: plan.evalTasks },
    epochs: 1,
    retries: 1,
    concurrency: plan.evalConcurrency,
    sampling: { temperature: plan.evalTemperature },
  });
  try {
    for (;;) {
      await sleep(WATCH_INTERVAL_MS, signal);
      if (signal.aborted) return { outcome: 'failed', reason: 'interrupted', retryable: true };
      const status = peer.runner.get('final-eval');
      if (status.state === 'broken') return { outcome: 'failed', reason: `the held-out evaluation keeps failing: ${status.reason ?? 'unknown'}`, retryable: false };
      if (status.state !== 'running' && status.inFlight === 0) return { outcome: 'done' };
    }
  } finally {
    await peer.runner.detach('final-eval', { abortInFlight: true });
  }
}

/** The guardian's rules over a run's steps as they arrive. */
export class RunGuard {
  private readonly startedAt: number;
  private lastStepAt: number;
  /** The last run step looked at. */
  seenStep: number;
  /** Whether this start of the run has made a step (the first-step bound applies until it has). */
  private stepped = false;
  private bestReward = -Infinity;
  private stepsSinceBest = 0;
  private wasAbove = false;
  private stepsBelow = 0;

  constructor(
    private readonly rules: GuardRules,
    startStep: number,
    private readonly now: () => number = Date.now,
  ) {
    this.seenStep = startStep;
    this.startedAt = now();
    this.lastStepAt = this.startedAt;
  }

  /** Null while the run may go on; otherwise how it ends. */
  check(steps: readonly RunStep[]): StudyRunEnd | null {
    const now = this.now();
    for (const step of steps) {
      this.seenStep = step.runStep;
      this.lastStepAt = now;
      this.stepped = true;
      const verdict = this.judge(step);
      if (verdict) return verdict;
    }
    if (now - this.startedAt > this.rules.runWallMs) return { outcome: 'stopped', reason: `run wall-time cap of ${minutes(this.rules.runWallMs)} reached` };
    const sinceStep = now - this.lastStepAt;
    if (!this.stepped && sinceStep > this.rules.firstStepMs) {
      return { outcome: 'failed', reason: `no first step within ${minutes(this.rules.firstStepMs)}`, retryable: true };
    }
    if (sinceStep > this.rules.stepMs) return { outcome: 'failed', reason: `stalled: no step for ${minutes(this.rules.stepMs)}`, retryable: true };
    return null;
  }

  private judge(step: RunStep): StudyRunEnd | null {
    const { loss, kl } = step.metrics;
    if (this.rules.nanLoss && !Number.isFinite(loss)) return { outcome: 'stopped', reason: `early stop: loss is ${String(loss)} at step ${step.step}` };
    if (this.rules.maxKl !== null && kl > this.rules.maxKl) return { outcome: 'stopped', reason: `early stop: KL ${kl.toPrecision(3)} above ${this.rules.maxKl} at step ${step.step}` };
    const reward = step.rewardMean;
    if (this.rules.rewardCollapse) {
      const { below, steps } = this.rules.rewardCollapse;
      if (reward > below) {
        this.wasAbove = true;
        this.stepsBelow = 0;
      } else if (this.wasAbove && ++this.stepsBelow >= steps) {
        return { outcome: 'stopped', reason: `early stop: reward collapsed to ${reward.toPrecision(3)} (at or below ${below} for ${steps} steps)` };
      }
    }
    if (reward > this.bestReward) {
      this.bestReward = reward;
      this.stepsSinceBest = 0;
    } else if (this.rules.noProgressSteps !== null && ++this.stepsSinceBest >= this.rules.noProgressSteps) {
      return { outcome: 'stopped', reason: `early stop: no reward above ${this.bestReward.toPrecision(3)} for ${this.rules.noProgressSteps} steps` };
    }
    return null;
  }
}

function minutes(ms: number): string {
  const m = ms / 60_000;
  return m >= 1 ? `${Math.round(m * 10) / 10} min` : `${Math.round(ms / 1000)} s`;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
