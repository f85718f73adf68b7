/**
 * Training runs over the control API (`/api/runs…`) and the CLI (`agentjet runs …`).
 *
 * A run is one model trained from one starting point with one configuration, in one data dir. Restarting the peer
 * with the same configuration continues the run (a `resume` event); a different configuration starts a new run
 * that continues the previous one's weights (its `parentId`), unless the peer is told to start fresh from the
 * model's source weights (`startFrom.kind === 'source'`). A change made while the run trains (PATCH …/config) is
 * a `config-change` event on its curve.
 *
 * Steps of a run are numbered from its own start (`runStep`): a fresh run begins at 1, a continued run carries its
 * parent's numbering on, so curves of runs that share weights line up.
 *
 * Pure types and zod schemas: no Node APIs here.
 */
import { z } from 'zod';

export const RUN_STATUSES = ['running', 'paused', 'stopped', 'finished', 'failed', 'crashed'] as const;
/**
 * - running / paused: its training loop is collecting episodes (and stepping, when running).
 * - stopped: stopped cleanly (the peer stopped, or training was stopped); starting again continues it.
 * - finished: it reached its maxSteps.
 * - failed: its last step threw (the loop's lastError says why).
 * - crashed: the peer died while it ran; the next start with the same configuration continues it.
 */
export type RunStatus = (typeof RUN_STATUSES)[number];

/** Where a run's weights started. */
export type RunStart =
  /** The model's configured source (a fresh run). */
  | { kind: 'source'; source: string }
  /** The parent run's weights at one of its steps (the latest checkpoint when the run began; null: none yet). */
  | { kind: 'continued'; source: string; parentId: string; checkpointStep: number | null };

export const RUN_EVENT_KINDS = ['start', 'resume', 'config-change', 'checkpoint', 'hot-swap', 'revert', 'stop', 'finish', 'fail'] as const;
export type RunEventKind = (typeof RUN_EVENT_KINDS)[number];

/** A marker on a run's curves. `step` is the run step it happened after (0: before the first). */
export interface RunEvent {
  kind: RunEventKind;
  step: number;
  /** ISO time. */
  time: string;
  /** One line for a tooltip: "lr 1e-5 → 3e-5", "calc-agent v2 (a1b2c3…)", "checkpoint of step 20". */
  label: string;
  detail: Record<string, unknown>;
}

/** A held-out evaluation point: the eval episodes that ran on one policy version of the run. */
export interface RunEvalPoint {
  /** The run step whose weights the episodes ran on (0: the starting weights). */
  step: number;
  policyVersion: number;
  episodes: number;
  /** Ended eval episodes with reward ≥ 1 … as the episodes' own success flags say; null when none reported one. */
  successRate: number | null;
  meanReward: number | null;
  /** ISO time of the last of them. */
  time: string;
}

/** Why a run's batches are thin: shown as a warning on the run and the Models page. */
export interface RunWarning {
  code: 'mostly_discarded' | 'no_steps_yet' | 'checkpoint_failing';
  message: string;
}

/** One row of `GET /api/runs` (newest first). */
export interface RunSummary {
  id: string;
  /** Human name: `<model>-<n>` unless given (`training.runName`). */
  name: string;
  model: string;
  status: RunStatus;
  start: RunStart;
  seed: number;
  /** Short hash of the resolved configuration (equal hashes: equal configurations). */
  configHash: string;
  /** ISO times. */
  createdAt: string;
  endedAt: string | null;
  /** Recorded steps that stand (reverted ones excluded). */
  steps: number;
  /** The latest run step, 0 before the first. */
  lastStep: number;
  bestReward: number | null;
  lastReward: number | null;
  lastEval: RunEvalPoint | null;
  warnings: RunWarning[];
  /**
   * The run's episodes: the model's, created from `from` until `before` (the model's next run began; null: still
   * open). The filter to export or list them with (`/api/episodes.jsonl?model=…&createdFrom=…&createdBefore=…`).
   */
  episodeWindow: { from: string; before: string | null };
}

/** A script that produced episodes for the run, per version. */
export interface RunScript {
  client: string;
  /** The attached version (1, 2, … per hot swap); null for episodes from outside the runner (SDK, swarm). */
  version: number | null;
  hash: string | null;
  episodes: number;
  /** ISO time of its first episode in the run. */
  firstAt: string;
  lastAt: string;
}

/** Per task over the run's episodes, train and held-out split apart. */
export interface RunTaskRow {
  taskId: string;
  kind: 'train' | 'eval';
  episodes: number;
  meanReward: number | null;
  successRate: number | null;
  /** Mean reward of its episodes on the latest policy version it ran on. */
  lastReward: number | null;
}

export interface RunCheckpoint {
  /** Run step. */
  step: number;
  modelStep: number;
  policyVersion: number;
  time: string;
  dir: string;
}

/** `GET /api/runs/:id`. `config` is the full resolved training configuration (TrainingConfig, as JSON). */
export interface RunDetail extends RunSummary {
  config: Record<string, unknown>;
  /** Keys of `config` (dot paths) that differ from the defaults for this model. */
  changedFromDefaults: string[];
  events: RunEvent[];
  scripts: RunScript[];
  checkpoints: RunCheckpoint[];
  /** Model step = run step + stepOffset. */
  stepOffset: number;
}

/** `GET /api/runs/compare?ids=a,b,…`: the runs and the config keys whose values differ among them. */
export interface RunComparison {
  runs: RunDetail[];
  /** Dot paths, e.g. `train.learningRate`, sorted. */
  differingKeys: string[];
}

/** How many runs a comparison overlays: enough for a sweep's arms, few enough for a legend to stay readable. */
export const MAX_COMPARED_RUNS = 8;

export const runIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'a run id as `agentjet runs list` prints it');

export const compareQuerySchema = z
  .string()
  .transform((raw) => raw.split(',').filter((id) => id !== ''))
  .pipe(z.array(runIdSchema).min(2, 'compare at least 2 runs').max(MAX_COMPARED_RUNS, `compare at most ${MAX_COMPARED_RUNS} runs`));
