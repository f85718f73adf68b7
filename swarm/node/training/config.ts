/**
 * The training loop's configuration: one plain typed object with defaults. Every field can be overridden for all
 * models and per model (config file `training:` and `models[].training:`, `serve`/`node` flags, the runtime's
 * `training` option); `resolveTrainingConfig` validates overrides with zod at the edge and names the bad key with
 * what it accepts. Defaults depend on the model where one size does not fit (`defaultTrainingConfig`).
 */
import { z } from 'zod';
import type { LoraConfig, ModelSource, TrainOptions } from '../../../worker/common/engine.ts';
import { closestName } from '../../common/closest-name.ts';
import { TrainingConfigError } from './errors.ts';

export type SamplerPlacement = 'auto' | 'shared' | 'separate';

export interface TrainingConfig {
  /** GRPO groups (tasks) per optimizer step. */
  batchTasks: number;
  /** Finished train episodes per group (the repeats of one task). */
  groupSize: number;
  /** Groups whose rewards are all equal have zero advantage everywhere: leave them out of the batch. */
  excludeUniformGroups: boolean;
  /** Save a checkpoint every N steps of the run (0 = never, not even at the end). */
  checkpointEvery: number;
  /** Stop the run after this many of its steps (0 = no limit). */
  maxSteps: number;
  /**
   * Finished episodes sampled more than this many policy versions before the current one are dropped rather
   * than trained on (PPO's clipped ratio only corrects small policy lags).
   */
  maxPolicyLag: number;
  /**
   * Asynchronous training's staleness bound η (0 = synchronous: a ready batch drains the model, then it updates).
   * With η ≥ 1 a step never drains: episodes keep running while the engine updates (a call waits for the update
   * and continues on the new weights, so an episode may span versions), episodes sampled more than η versions ago
   * are dropped as stale (it replaces maxPolicyLag), and new train episodes are admitted only while the ones in
   * flight and queued fit η + 1 batches (AReaL's admission rule), so little sampled work goes stale. Pair it with
   * an off-policy loss (`train.loss: decoupled-ppo`).
   */
  staleness: number;
  /**
   * Which engine serves the model's calls. 'separate' starts a second engine (its own worker thread) that samples
   * while the first one trains, and takes the trainer's weights after each step (the LoRA adapters only, with
   * LoRA); it costs a second copy of the weights. 'shared' samples on the trainer's engine: a step holds the calls
   * for its duration. 'auto' is 'separate' when `staleness` ≥ 1, when sampling and training overlap. Fixed at
   * engine start.
   */
  sampler: SamplerPlacement;
  /** Added to the group std so that near-uniform groups do not blow advantages up. */
  advantageEpsilon: number;
  /** 'merged' trains on timelines; 'naive' on one sample per call (for comparison: same loss, more tokens). */
  mergeMode: 'merged' | 'naive';
  /**
   * Held-out evaluation every N steps of the run: attached scripts with held-out tasks ("split": "eval") run them
   * once on the weights of every Nth step (0 = once per pass over the tasks, the runner's default).
   */
  evalEvery: number;
  /** Seeds the engine (LoRA initialisation, sampling without a request seed); recorded with the run. */
  seed: number;
  /** Train LoRA adapters on a frozen base instead of every weight (null: full fine-tuning). Fixed at engine start. */
  lora: LoraConfig | null;
  /** PPO-clip options handed to engine.trainStep. */
  train: TrainOptions;
}

/** Defaults for the engine's update: a conservative PPO-clip step on the token-sum loss. */
export const DEFAULT_TRAIN_OPTIONS: TrainOptions = {
  loss: 'ppo',
  // 0.2 both ways: the PPO paper's value (clip-higher, DAPO's 0.28, is one setting away).
  clipLow: 0.2,
  clipHigh: 0.2,
  // No reference model by default: it costs a full copy of the weights.
  klCoef: 0,
  entropyCoef: 0,
  // Token-sum keeps merged timelines and per-call samples equivalent (docs: "Invariant to test").
  normalization: 'token-sum',
  // Fits a small model's activations comfortably on a laptop CPU; a GPU takes far more.
  microBatchTokens: 4096,
  // Full fine-tuning of a pretrained model: larger steps undo what pretraining learned.
  learningRate: 1e-5,
  weightDecay: 0,
  maxGradNorm: 1,
  schedule: { kind: 'constant' },
  // A batch's timelines as one prefix tree per micro-batch: a group's shared context computed once, same update.
  packing: 'tree',
};

export const DEFAULT_TRAINING_CONFIG: TrainingConfig = {
  batchTasks: 4,
  groupSize: 4,
  excludeUniformGroups: true,
  checkpointEvery: 10,
  maxSteps: 0,
  // One version: episodes still in flight while the previous step drained may join the next batch.
  maxPolicyLag: 1,
  staleness: 0,
  sampler: 'auto',
  advantageEpsilon: 1e-6,
  mergeMode: 'merged',
  evalEvery: 0,
  seed: 0,
  lora: null,
  train: DEFAULT_TRAIN_OPTIONS,
};

/** Whether the model's calls are sampled on an engine of their own (the `sampler` setting resolved). */
export function samplesSeparately(config: Pick<TrainingConfig, 'sampler' | 'staleness'>): boolean {
  return config.sampler === 'separate' || (config.sampler === 'auto' && config.staleness > 0);
}

/**
 * The defaults for one model. The built-in models are tiny and trained from scratch-like weights: they learn at the
 * demo's settings (`npm run demo`), where 1e-5 stays flat. LoRA adapters start at zero and take ~10x the full
 * fine-tuning rate.
 */
export function defaultTrainingConfig(source: ModelSource | null, lora: boolean): TrainingConfig {
  if (source?.kind === 'builtin') {
    return { ...DEFAULT_TRAINING_CONFIG, train: { ...DEFAULT_TRAIN_OPTIONS, learningRate: BUILTIN_LEARNING_RATE, klCoef: BUILTIN_KL_COEF } };
  }
  if (lora) return { ...DEFAULT_TRAINING_CONFIG, train: { ...DEFAULT_TRAIN_OPTIONS, learningRate: LORA_LEARNING_RATE } };
  return DEFAULT_TRAINING_CONFIG;
}

/** The demo's settings for the built-in models (swarm/node/demo/demo.ts measures them). */
export const BUILTIN_LEARNING_RATE = 5e-4;
export const BUILTIN_KL_COEF = 0.001;
const LORA_LEARNING_RATE = 1e-4;

// The bounds are what can be meant, not what fits a machine: a value past them is a typo (1e4 for 1e-4).
const count = (max: number) => z.number().int().min(1).max(max);
const countOrOff = (max: number) => z.number().int().min(0).max(max);
const MAX_STEPS = 10_000_000;
/** The engine's bound on optimizer updates in one step (train.epochs × train.miniBatches; worker/train.ts). */
const MAX_UPDATES_PER_STEP = 64;

export const lrScheduleSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('constant') }).strict(),
  z
    .object({
      kind: z.literal('warmup-cosine'),
      warmupSteps: countOrOff(MAX_STEPS),
      totalSteps: count(MAX_STEPS),
      minRatio: z.number().min(0).max(1),
    })
    .strict(),
]);

export const trainOptionsSchema = z
  .object({
    loss: z.enum(['ppo', 'decoupled-ppo', 'truncated-is', 'sft']),
    importanceCap: z.number().min(1).max(1e6),
    clipLow: z.number().min(0).max(1),
    clipHigh: z.number().min(0).max(10),
    klCoef: z.number().min(0).max(10),
    entropyCoef: z.number().min(0).max(1),
    normalization: z.enum(['token-sum', 'token-mean']),
    microBatchTokens: count(1_048_576),
    learningRate: z.number().min(0).max(1),
    weightDecay: z.number().min(0).max(1),
    maxGradNorm: z.number().positive().max(1e6),
    temperature: z.number().positive().max(10),
    schedule: lrScheduleSchema,
    packing: z.enum(['tree', 'rows']),
    miniBatches: count(MAX_UPDATES_PER_STEP),
    epochs: count(MAX_UPDATES_PER_STEP),
  })
  .partial()
  .strict();

export const loraSchema = z
  .object({
    rank: count(1024),
    alpha: z.number().positive().max(4096),
    targetModules: z.array(z.string().regex(/^[A-Za-z0-9_.]+$/, 'a module name such as q_proj')).min(1).max(64),
    dropout: z.number().min(0).max(0.9).optional(),
  })
  .strict();

export const trainingConfigSchema = z
  .object({
    batchTasks: count(4096),
    // One episode per group has no baseline: every group would be uniform and discarded.
    groupSize: z.number().int().min(2).max(1024),
    excludeUniformGroups: z.boolean(),
    checkpointEvery: countOrOff(MAX_STEPS),
    maxSteps: countOrOff(MAX_STEPS),
    maxPolicyLag: countOrOff(1000),
    staleness: countOrOff(1000),
    sampler: z.enum(['auto', 'shared', 'separate']),
    advantageEpsilon: z.number().positive().max(1),
    mergeMode: z.enum(['merged', 'naive']),
    evalEvery: countOrOff(MAX_STEPS),
    seed: z.number().int().min(0).max(2 ** 31 - 1),
    lora: loraSchema.nullable(),
    train: trainOptionsSchema,
  })
  .partial()
  .strict();

export type TrainingConfigOverrides = z.input<typeof trainingConfigSchema>;

/** Overrides laid over others: `train` and `lora` merged key by key, everything else replaced. */
export function mergeOverrides(base: TrainingConfigOverrides, over: TrainingConfigOverrides): TrainingConfigOverrides {
  const merged: TrainingConfigOverrides = { ...base, ...over };
  if (base.train || over.train) merged.train = { ...base.train, ...over.train };
  if (over.lora === null) merged.lora = null;
  else if (base.lora || over.lora) merged.lora = { ...base.lora, ...over.lora } as TrainingConfigOverrides['lora'];
  return merged;
}

/** Checks overrides without resolving them; throws TrainingConfigError naming the first bad key and what it accepts. */
export function parseTrainingOverrides(overrides: unknown, where = ''): TrainingConfigOverrides {
  const result = trainingConfigSchema.safeParse(overrides ?? {}, { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
  const field = [...issue.path, ...keys.slice(0, 1)].map(String).join('.');
  const { reason, allowed } = describeIssue(issue, field);
  throw new TrainingConfigError(`${where}${field || '(the training settings)'}: ${reason}`, field || undefined, allowed);
}

/** Defaults for the model with the overrides applied; throws a TrainingConfigError naming the first bad field. */
export function resolveTrainingConfig(overrides: unknown = {}, defaults: TrainingConfig = DEFAULT_TRAINING_CONFIG): TrainingConfig {
  const parsed = parseTrainingOverrides(overrides);
  const lora = parsed.lora === undefined ? defaults.lora : parsed.lora === null ? null : ({ ...defaults.lora, ...parsed.lora } as LoraConfig);
  const train = { ...defaults.train, ...parsed.train };
  const updates = (train.epochs ?? 1) * (train.miniBatches ?? 1);
  if (updates > MAX_UPDATES_PER_STEP) {
    throw new TrainingConfigError(`train.epochs × train.miniBatches: must be at most ${MAX_UPDATES_PER_STEP} updates a step, got ${updates}`, 'train.epochs', `at most ${MAX_UPDATES_PER_STEP} together`);
  }
  return { ...defaults, ...parsed, lora, train };
}

type Issue = z.core.$ZodIssue;

/** What is wrong and what the key accepts, in words a config-file author can act on. */
function describeIssue(issue: Issue, field: string): { reason: string; allowed?: string } {
  const got = received(issue);
  switch (issue.code) {
    case 'unrecognized_keys': {
      const parent = field.split('.').slice(0, -1);
      const known = knownKeys(parent);
      const guess = closestName(issue.keys[0], [...known, ...Object.keys(trainOptionsSchema.shape)]) ?? null;
      const hint = guess && !known.includes(guess) ? ` (did you mean ${[...parent, 'train', guess].join('.')}?)` : guess ? ` (did you mean ${[...parent, guess].join('.')}?)` : '';
      const allowed = known.join(', ');
      return { reason: `unknown key${hint}; allowed: ${allowed}`, allowed };
    }
    case 'too_small': {
      const allowed = `${issue.inclusive === false ? 'greater than' : 'at least'} ${String(issue.minimum)}`;
      return { reason: `must be ${allowed}${got}`, allowed };
    }
    case 'too_big': {
      const allowed = `${issue.inclusive === false ? 'less than' : 'at most'} ${String(issue.maximum)}`;
      return { reason: `must be ${allowed}${got}`, allowed };
    }
    case 'invalid_value': {
      const allowed = `one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
      return { reason: `must be ${allowed}${got}`, allowed };
    }
    case 'invalid_type': {
      const allowed = issue.expected === 'int' ? 'an integer' : `a ${issue.expected}`;
      return { reason: `must be ${allowed}${got}`, allowed };
    }
    default:
      return { reason: issue.message };
  }
}

function received(issue: Issue): string {
  const input = (issue as { input?: unknown }).input;
  return input === undefined ? '' : `, got ${JSON.stringify(input)}`;
}

function knownKeys(parent: string[]): string[] {
  if (parent.at(-1) === 'train') return Object.keys(trainOptionsSchema.shape);
  if (parent.at(-1) === 'lora') return Object.keys(loraSchema.shape);
  return Object.keys(trainingConfigSchema.shape);
}
