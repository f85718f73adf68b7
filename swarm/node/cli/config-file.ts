/**
 * The peer's config file (`agentjet serve --config FILE`), JSON or YAML (chosen by extension: .json, else YAML).
 * Every key is optional; command-line flags override the file (`--model` replaces its model list, `--alias` adds).
 * Relative paths are relative to the file's folder.
 *
 *   # agentjet.yaml
 *   port: 8470                 # 0 = any free port
 *   host: 127.0.0.1
 *   dataDir: ./agentjet-data
 *   logLevel: info             # debug | info | warn | error | silent
 *   models:
 *     - source: builtin:tiny   # or a Hugging Face model folder: ./Qwen3-0.6B
 *       name: tiny             # default: builtin name or folder name
 *       aliases: [gpt-4o-mini] # other names clients may send as `model`
 *       poolLimit: 64          # episodes at once on this model
 *       drainTimeoutS: 60      # before an update, how long episodes in flight may take before they are aborted
 *       maxIdleTimeoutS: 3600  # the longest idle timeout an episode may ask for
 *       training:              # this model's training settings, over the global ones below
 *         train: { learningRate: 3.0e-4 }
 *   aliases:                   # more aliases: NAME: MODEL
 *     default: tiny
 *   training:                  # every model's training settings (swarm/node/training/config.ts: keys, ranges)
 *     groupSize: 8
 *     batchTasks: 4
 *     maxSteps: 200
 *     checkpointEvery: 20
 *     evalEvery: 10
 *     train: { learningRate: 1.0e-5, klCoef: 0.001, clipHigh: 0.28, schedule: { kind: constant } }
 *     lora: { rank: 16, alpha: 32, targetModules: [q_proj, v_proj] }
 *
 * A bad file is a ConfigFileError naming the key and the reason (the CLI exits with 2).
 */
import { readFileSync } from 'node:fs';
import { dirname, extname, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { parseTrainingOverrides, type TrainingConfigOverrides } from '../training/config.ts';
import { TrainingConfigError } from '../training/errors.ts';

export class ConfigFileError extends Error {
  override name = 'ConfigFileError';
  constructor(
    readonly file: string,
    readonly key: string | null,
    reason: string,
  ) {
    super(key ? `${file}: ${key}: ${reason}` : `${file}: ${reason}`);
  }
}

const modelEntrySchema = z
  .object({
    source: z.string().min(1),
    name: z.string().min(1).optional(),
    aliases: z.array(z.string().min(1)).optional(),
    poolLimit: z.number().int().positive().optional(),
    // Up to a day: an update held longer than that is a run that has stopped training.
    drainTimeoutS: z.number().positive().max(86_400).optional(),
    maxIdleTimeoutS: z.number().positive().max(86_400).optional(),
    // Checked by the training config's own schema below, so its errors name the key and its range.
    training: z.unknown().optional(),
  })
  .strict();

export const peerConfigSchema = z
  .object({
    port: z.number().int().min(0).max(65535).optional(),
    host: z.string().min(1).optional(),
    dataDir: z.string().min(1).optional(),
    logLevel: z.enum(['debug', 'info', 'warn', 'error', 'silent']).optional(),
    models: z.array(modelEntrySchema).optional(),
    aliases: z.record(z.string(), z.string()).optional(),
    training: z.unknown().optional(),
  })
  .strict();

export type PeerConfig = Omit<z.infer<typeof peerConfigSchema>, 'training' | 'models'> & {
  baseDir: string;
  training?: TrainingConfigOverrides;
  models?: Array<Omit<z.infer<typeof modelEntrySchema>, 'training'> & { training?: TrainingConfigOverrides }>;
};

export function readConfigFile(path: string): PeerConfig {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigFileError(file, null, (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message);
  }
  let value: unknown;
  try {
    value = extname(file).toLowerCase() === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigFileError(file, null, `not valid ${extname(file).toLowerCase() === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`);
  }
  const parsed = peerConfigSchema.safeParse(value ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : [];
    const path = [...issue.path, ...keys.slice(0, 1)].join('.');
    const reason = issue.code === 'unrecognized_keys' ? 'unknown key' : issue.message;
    throw new ConfigFileError(file, path || null, reason);
  }
  const training = trainingOf(file, 'training', parsed.data.training);
  const models = parsed.data.models?.map((entry, i) => ({ ...entry, training: trainingOf(file, `models.${i}.training`, entry.training) }));
  return { ...parsed.data, training, models, baseDir: dirname(file) };
}

function trainingOf(file: string, key: string, value: unknown): TrainingConfigOverrides | undefined {
  if (value === undefined || value === null) return undefined;
  try {
    return parseTrainingOverrides(value);
  } catch (err) {
    if (!(err instanceof TrainingConfigError)) throw err;
    throw new ConfigFileError(file, err.field ? `${key}.${err.field}` : key, err.message.slice(err.message.indexOf(': ') + 2));
  }
}
