/**
 * The training loop's configuration: one plain typed object with defaults. Every field can be overridden per
 * model; `resolveTrainingConfig` validates overrides with zod at the edge (control API, CLI, config files).
 */
import { z } from 'zod';
import type { TrainOptions } from '../../../worker/common/engine.ts';
import { TrainingConfigError } from './errors.ts';

export interface TrainingConfig {
  /** GRPO groups (tasks) per optimizer step. */
  batchTasks: number;
  /** Finished train episodes per group (the repeats of one task). */
  groupSize: number;
  /** Groups whose rewards are all equal have zero advantage everywhere: leave them out of the batch. */
  excludeUniformGroups: boolean;
  /** Save a checkpoint every N steps (0 = never). */
  checkpointEvery: number;
  /** Stop training after this many steps in total (0 = no limit). */
  maxSteps: number;
  /**
   * Finished episodes sampled more than this many policy versions before the current one are dropped rather
   * than trained on (PPO's clipped ratio only corrects small policy lags).
   */
  maxPolicyLag: number;
  /** Added to the group std so that near-uniform groups do not blow advantages up. */
  advantageEpsilon: number;
  /** 'merged' trains on timelines; 'naive' on one sample per call (for comparison: same loss, more tokens). */
  mergeMode: 'merged' | 'naive';
  /** PPO-clip options handed to engine.trainStep. */
  train: TrainOptions;
}

/** Defaults for the engine's update: a conservative PPO-clip step on the token-sum loss. */
export const DEFAULT_TRAIN_OPTIONS: TrainOptions = {
  loss: 'ppo',
  // 0.2 both ways: the PPO paper's value.
  clipLow: 0.2,
  clipHigh: 0.2,
  // No reference model by default: it costs a full copy of the weights.
  klCoef: 0,
  // Token-sum keeps merged timelines and per-call samples equivalent (docs: "Invariant to test").
  normalization: 'token-sum',
  // Fits a small model's activations comfortably on a laptop CPU; a GPU takes far more.
  microBatchTokens: 4096,
  learningRate: 1e-5,
  weightDecay: 0,
  maxGradNorm: 1,
};

export const DEFAULT_TRAINING_CONFIG: TrainingConfig = {
  batchTasks: 4,
  groupSize: 4,
  excludeUniformGroups: true,
  checkpointEvery: 10,
  maxSteps: 0,
  // One version: episodes still in flight while the previous step drained may join the next batch.
  maxPolicyLag: 1,
  advantageEpsilon: 1e-6,
  mergeMode: 'merged',
  train: DEFAULT_TRAIN_OPTIONS,
};

const positiveInt = z.number().int().positive();
const nonNegativeInt = z.number().int().nonnegative();

export const trainOptionsSchema = z
  .object({
    loss: z.enum(['ppo', 'sft']),
    clipLow: z.number().min(0).max(1),
    clipHigh: z.number().min(0),
    klCoef: z.number().min(0),
    normalization: z.enum(['token-sum', 'token-mean']),
    microBatchTokens: positiveInt,
    learningRate: z.number().min(0),
    weightDecay: z.number().min(0),
    maxGradNorm: z.number().positive(),
  })
  .partial()
  .strict();

export const trainingConfigSchema = z
  .object({
    batchTasks: positiveInt,
    groupSize: positiveInt,
    excludeUniformGroups: z.boolean(),
    checkpointEvery: nonNegativeInt,
    maxSteps: nonNegativeInt,
    maxPolicyLag: nonNegativeInt,
    advantageEpsilon: z.number().positive(),
    mergeMode: z.enum(['merged', 'naive']),
    train: trainOptionsSchema,
  })
  .partial()
  .strict();

export type TrainingConfigOverrides = z.input<typeof trainingConfigSchema>;

/** Defaults with the overrides applied; throws a TrainingConfigError naming the first bad field. */
export function resolveTrainingConfig(overrides: unknown = {}): TrainingConfig {
  const result = trainingConfigSchema.safeParse(overrides);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue.path.join('.') || undefined;
    throw new TrainingConfigError(field ? `${field}: ${issue.message}` : issue.message, field);
  }
  const parsed = result.data;
  return {
    ...DEFAULT_TRAINING_CONFIG,
    ...parsed,
    train: { ...DEFAULT_TRAIN_OPTIONS, ...parsed.train },
  };
}
