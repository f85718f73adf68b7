/**
 * What the training loop needs from the peer's store, as one small interface. `sqlite-training-store.ts` binds it
 * to the store's repository functions (swarm/node/store); the loop stays free of SQL.
 */
import type { MergeCall, MergeMode } from '../../common/timeline/merge.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import type { SampleTimeline } from './advantages.ts';
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

export interface TrainingStore {
  /** The model's latest recorded step, or null before its first. */
  lastStep(model: string): { step: number; policyVersion: number } | null;
  insertStep(summary: TrainStepSummary): void;
  /** Oldest first: the steps after `afterStep` (all when omitted), at most `limit`. */
  listSteps(model: string, options: { afterStep?: number; limit: number }): TrainStepSummary[];
  /** An episode's calls in the order they completed, as the timeline merger takes them. */
  episodeCalls(episodeId: string): MergeCall[];
  /** The timelines stored when the episode ended; null when none were (it never ended). */
  episodeTimelines(episodeId: string): StoredEpisodeTimelines | null;
  /** Records why episodes were (or were not) trained on. */
  markEpisodes(marks: readonly EpisodeMark[]): void;
}
