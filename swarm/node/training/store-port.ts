/**
 * What the training loop needs from the peer's store, as one small interface. `sqlite-training-store.ts` binds it
 * to the store's repository functions (swarm/node/store); the loop stays free of SQL.
 */
import type { MergeCall } from '../../common/timeline/merge.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import type { EpisodeMark } from './batcher.ts';

export interface TrainingStore {
  /** The model's latest recorded step, or null before its first. */
  lastStep(model: string): { step: number; policyVersion: number } | null;
  insertStep(summary: TrainStepSummary): void;
  /** Oldest first: the steps after `afterStep` (all when omitted), at most `limit`. */
  listSteps(model: string, options: { afterStep?: number; limit: number }): TrainStepSummary[];
  /** An episode's calls in the order they completed, as the timeline merger takes them. */
  episodeCalls(episodeId: string): MergeCall[];
  /** Records why episodes were (or were not) trained on. */
  markEpisodes(marks: readonly EpisodeMark[]): void;
}
