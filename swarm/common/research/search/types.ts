/**
 * The shared contract of the study stage's search strategies: the space of knobs an arm is drawn from, the spec that
 * picks a strategy, what the scheduler reports of each run, and what a strategy proposes back. Every strategy is a
 * pure function of the runs it is shown, so a study resumed after a crash proposes the same arms again.
 */

export type ParamValue = number | string | boolean;
/** Knob path (a training setting such as "train.learningRate" or "groupSize") → value. */
export type Params = Record<string, ParamValue>;

/** A categorical knob: one of these values. */
export interface ValuesDimension { values: ParamValue[] }
/** A numeric knob in [min, max], uniform in log-space when `log`, rounded to whole numbers when `integer`. */
export interface RangeDimension { min: number; max: number; log?: boolean; integer?: boolean }
export type SpaceDimension =
  | ValuesDimension // categorical / explicit list
  | RangeDimension; // numeric range
export type SearchSpace = Record<string, SpaceDimension>;

export type SearchSpec =
  | { strategy: 'grid'; space: SearchSpace; pointsPerRange?: number } // ranges become pointsPerRange (default 3) evenly (log-)spaced points
  | { strategy: 'random'; space: SearchSpace; trials: number }
  | { strategy: 'successive-halving'; space: SearchSpace; trials: number; eta: number; minSteps: number; asynchronous: boolean }
  | { strategy: 'tpe'; space: SearchSpace; trials: number; startupTrials: number; gamma: number; candidates: number };

/** What the scheduler knows of one run of the stage. */
export interface TrialOutcome {
  arm: string;
  params: Params;
  seed: number;
  /** The steps this run was asked to train (for successive halving, its rung's budget). */
  steps: number;
  state: 'pending' | 'running' | 'done' | 'failed' | 'stopped';
  /** The run's metric (higher is better); null until done, and for failed/stopped runs. */
  metric: number | null;
}

/** An arm to run (every seed of the stage) to `steps`; `continues` names an arm whose runs are extended (a promotion) instead of started afresh. */
export interface ArmProposal { arm: string; params: Params; steps: number; continues?: string }

/** The stage's winner by a strategy's own rule. */
export interface BestArm { arm: string; params: Params; metric: number }

export interface SearchStrategy {
  readonly name: SearchSpec['strategy'];
  /**
   * Arms to start now, given every run of the stage so far (all seeds, all rungs). An empty list with done=false
   * means: wait for running runs. Must never propose the same (arm, steps) twice; must be a pure function of
   * `trials` and the strategy's construction (so a study resumed after a crash proposes the same arms).
   */
  next(trials: readonly TrialOutcome[]): { arms: ArmProposal[]; done: boolean };
  /** The stage's winner by the strategy's own rule (e.g. the top arm of the last rung), or null if nothing finished. */
  best(trials: readonly TrialOutcome[]): BestArm | null;
}

export interface StrategyContext {
  /** The stage's full per-run step budget (for SH: the top rung). */
  steps: number;
  /** Seeds per arm: an arm's metric is the mean over its seeds' finished runs (an arm counts as finished when all its seeds are done/failed/stopped at that steps). */
  seeds: number;
  /** Seed of the strategy's own sampling (random, TPE, SH initial sample). */
  seed: number;
  /** Most arms that may be in flight at once (successive halving / TPE propose at most this many at a time; grid/random may propose all). */
  parallelArms: number;
}

/** What the stage's runs say of one arm at one step budget. */
export interface ArmResult {
  arm: string;
  params: Params;
  steps: number;
  /** Every seed's run reached done/failed/stopped. */
  finished: boolean;
  /** Mean metric over the seeds' done runs; -Infinity when none succeeded; null while unfinished. */
  metric: number | null;
}
