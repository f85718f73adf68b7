/**
 * The training flags of `serve` and `node`: the common settings, each mapped onto the config file's `training:`
 * keys (training/config.ts) and laid over them for every model. A value out of range is a UsageError naming the
 * flag and what it accepts.
 */
import type { LoraConfig } from '../../../worker/common/engine.ts';
import { parseTrainingOverrides, type TrainingConfigOverrides } from '../training/config.ts';
import { TrainingConfigError } from '../training/errors.ts';
import { UsageError, type OptionSpec, type OptionValues } from './command.ts';

/** What `--lora-rank` alone trains: the attention projections PEFT's LoRA examples start with, alpha twice the rank. */
const LORA_FLAG_DEFAULTS: Omit<LoraConfig, 'rank' | 'alpha'> = { targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'] };

/** flag → the config key it sets (dot path) */
const NUMBER_FLAGS = {
  lr: 'train.learningRate',
  'group-size': 'groupSize',
  'batch-tasks': 'batchTasks',
  kl: 'train.klCoef',
  'mini-batches': 'train.miniBatches',
  epochs: 'train.epochs',
  'max-steps': 'maxSteps',
  'checkpoint-every': 'checkpointEvery',
  'eval-every': 'evalEvery',
  'lora-rank': 'lora.rank',
  seed: 'seed',
} as const;

type NumberFlag = keyof typeof NUMBER_FLAGS;

export const trainingFlagOptions: OptionSpec = {
  ...Object.fromEntries(Object.keys(NUMBER_FLAGS).map((flag) => [flag, { type: 'string' }])),
  'new-run': { type: 'boolean' },
  'run-name': { type: 'string' },
};

export const trainingFlagsUsage = `Training (for every hosted model; over the config file's training: keys):
  --lr X            learning rate (train.learningRate; default 5e-4 for builtin models, 1e-5 otherwise, 1e-4 with LoRA)
  --group-size N    episodes per task per group (groupSize, default 4)
  --batch-tasks N   groups per optimizer step (batchTasks, default 4)
  --kl X            KL penalty towards the starting weights (train.klCoef; 0 = off)
  --mini-batches K  optimizer updates per step, one per part of the step's samples (train.miniBatches, default 1)
  --epochs N        passes over those mini-batches per step (train.epochs, default 1; at most 64 updates a step)
  --max-steps N     stop the run after N steps (maxSteps; 0 = no limit)
  --checkpoint-every N  checkpoint every N steps (checkpointEvery, default 10; 0 = never)
  --eval-every N    held-out tasks run on every Nth step's weights (evalEvery; 0 = once per pass over the tasks)
  --lora-rank N     train LoRA adapters of rank N (alpha 2N, on q/k/v/o_proj) instead of every weight
  --seed N          the engine's seed (recorded with the run)
  --new-run         start a new run from the model's source weights instead of continuing the latest
  --run-name NAME   the name of a new run (default <model>-<n>)`;

function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let node = target;
  for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
  node[keys.at(-1)!] = value;
}

/** The overrides the flags give (empty when none is set). */
export function trainingOverridesFromFlags(values: OptionValues): TrainingConfigOverrides {
  const overrides: Record<string, unknown> = {};
  for (const [flag, path] of Object.entries(NUMBER_FLAGS) as [NumberFlag, string][]) {
    const raw = values[flag];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (typeof raw !== 'string' || raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${flag} takes a number, got "${String(raw)}"`);
    setPath(overrides, path, n);
  }
  const lora = overrides.lora as { rank?: number } | undefined;
  if (lora?.rank !== undefined) overrides.lora = { ...LORA_FLAG_DEFAULTS, rank: lora.rank, alpha: 2 * lora.rank };
  try {
    return parseTrainingOverrides(overrides);
  } catch (err) {
    if (!(err instanceof TrainingConfigError)) throw err;
    const flag = (Object.entries(NUMBER_FLAGS) as [NumberFlag, string][]).find(([, path]) => path === err.field)?.[0];
    throw new UsageError(flag ? `--${flag} must be ${err.allowed ?? 'valid'}, got ${String(values[flag])}` : err.message);
  }
}

/** `--new-run` and `--run-name`, as the runtime takes them. */
export function runFlags(values: OptionValues): { fresh: boolean; name?: string } {
  const name = values['run-name'] as string | undefined;
  if (name !== undefined && !/^[A-Za-z0-9][A-Za-z0-9._ -]{0,63}$/.test(name)) {
    throw new UsageError(`--run-name must be 1 to 64 letters, digits, spaces, dots, dashes or underscores, got "${name}"`);
  }
  return { fresh: values['new-run'] === true, ...(name ? { name } : {}) };
}
