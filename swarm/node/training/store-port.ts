/**
 * What the training loop needs from the peer's store, as one small interface. `sqlite-training-store.ts` binds it
 * to the store's repository functions (swarm/node/store); the loop stays free of SQL.
 */
import type { MergeCall, MergeMode } from '../../common/timeline/merge.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import type { SampleTimeline } from './advantages.ts';
import type { RunStatus, RunWarning } from '../../common/runs-api.ts';
import type { RunEventRecord, TrainingRunRow } from '../store/training-runs.ts';
import type { EpisodeMark } from './batcher.ts';

/** An ended episode as training takes it: the timelines stored at its end, never merged again. */
export interface StoredEpisodeTimelines {
  /** The mode they were merged in at `end` (the model's training mode). */
  mode: MergeMode;
  timelines: SampleTimeline[];
  /** Tokens one sample per call would have held (Σ prompt + generated over its calls). */
  naiveTokens: number;
  /** The episode's own success flag, as the agent or grader reported it at `end` (null: not reported). */
  success: boolean | null;
}

/** An ended train episode no step used and nothing marked: what the in-memory queue held before a restart. */
export interface PendingEpisode {
  episodeId: string;
  groupId: string;
  reward: number | null;
  policyVersion: number;
}

/** Where the model's recorded training stands (see resume in loop.ts). */
export interface TrainingHistory {
  /** The highest step number ever recorded (reverted or not): the next step is one more. */
  lastStep: number;
  /** The latest step that still stands (its update was not lost), or null. */
  standing: { step: number; policyVersion: number } | null;
  /** The latest restore of older weights, or null. */
  restore: { policyVersion: number; checkpointStep: number } | null;
  /** The highest policy version ever handed out: a fresh one is one more. */
  maxPolicyVersion: number;
}

/** The model's training runs (swarm/node/store/training-runs.ts). */
export interface RunsStore {
  latest(model: string): TrainingRunRow | null;
  /** The next run's sequence number across the data dir, and its number among the model's runs. */
  nextNumbers(model: string): { seq: number; ofModel: number };
  create(run: TrainingRunRow): void;
  setStatus(id: string, status: RunStatus): void;
  setConfig(id: string, config: Record<string, unknown>, configHash: string): void;
  setWarnings(id: string, warnings: readonly RunWarning[]): void;
  addEvent(event: RunEventRecord): void;
  /** Marks ended, unmarked train episodes created before `before` discarded (another run's rollouts). */
  discardEpisodesBefore(model: string, before: string, reason: string): number;
}

export interface TrainingStore {
  runs: RunsStore;
  /** The model's latest recorded step, or null before its first. */
  lastStep(model: string): { step: number; policyVersion: number } | null;
  insertStep(summary: TrainStepSummary): void;
  /**
   * Records a completed step: its row, the episodes it trained on and their `trained` state, in one transaction
   * (TrainStepExistsError, and nothing written, when the step number is taken).
   */
  recordStep(summary: TrainStepSummary, episodeIds: readonly string[]): void;
  /** Where training stands; `standing` only counts steps after `afterStep` (a run's own steps). */
  history(model: string, afterStep?: number): TrainingHistory;
  /**
   * The weights went back to checkpoint `checkpointStep` (0: the weights training started from) under the fresh
   * `policyVersion`: later standing steps are marked reverted and their episodes queued again. Returns both.
   */
  revertSteps(model: string, restore: { policyVersion: number; checkpointStep: number; afterStep: number }): { steps: number[]; episodeIds: string[] };
  /** Ended train episodes of the model no step used and nothing marked, in the order they ended. */
  pendingEpisodes(model: string): PendingEpisode[];
  /** Oldest first: the steps after `afterStep` (all when omitted), at most `limit`. */
  listSteps(model: string, options: { afterStep?: number; limit: number }): TrainStepSummary[];
  /** An episode's calls in the order they completed, as the timeline merger takes them. */
  episodeCalls(episodeId: string): MergeCall[];
  /** The timelines stored when the episode ended; null when none were (it never ended). */
  episodeTimelines(episodeId: string): StoredEpisodeTimelines | null;
  /** Records why episodes were (or were not) trained on. */
  markEpisodes(marks: readonly EpisodeMark[]): void;
}
