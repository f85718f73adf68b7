/**
 * Checkpoints of a model's training loop: `<dataDir>/checkpoints/<model>/step-<n>/` holds what engine.save wrote
 * (config.json + model.safetensors, or a PEFT adapter) and `checkpoint.json` (step, policy version, time,
 * metrics). The folder is written under a temporary name and renamed when complete, so a crash mid-save never
 * leaves a half checkpoint that a restart would pick up.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelSource, NamedTensors, TrainerEngine } from '../../../worker/common/engine.ts';
import { ADAPTER_CONFIG_FILE, readModelFolder, readPeftAdapter } from '../../../worker/node/hf-folder.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import { CheckpointError } from './errors.ts';

export const CHECKPOINT_META = 'checkpoint.json';

export interface CheckpointMeta {
  model: string;
  step: number;
  policyVersion: number;
  time: string;
  metrics: TrainStepSummary['metrics'];
  files: string[];
}

export interface CheckpointRef {
  dir: string;
  meta: CheckpointMeta;
}

/** `<dataDir>/checkpoints/<model>`; the model name is made safe for a folder name. */
export function checkpointsDir(dataDir: string, model: string): string {
  return join(dataDir, 'checkpoints', model.replace(/[^A-Za-z0-9._-]/g, '_'));
}

export async function saveCheckpoint(
  engine: TrainerEngine,
  dir: string,
  meta: Omit<CheckpointMeta, 'files'>,
): Promise<CheckpointRef> {
  const final = join(dir, `step-${meta.step}`);
  const partial = `${final}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const { files } = await engine.save(partial);
  const full: CheckpointMeta = { ...meta, files };
  writeFileSync(join(partial, CHECKPOINT_META), JSON.stringify(full, null, 2) + '\n');
  rmSync(final, { recursive: true, force: true });
  renameSync(partial, final);
  return { dir: final, meta: full };
}

/** The folders of the complete checkpoints in `dir`, highest step first. Unfinished folders are skipped. */
function checkpointFolders(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((name) => /^step-(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .sort((a, b) => Number(b[1]) - Number(a[1]))
    .map((m) => join(dir, m[0]))
    .filter((folder) => existsSync(join(folder, CHECKPOINT_META)));
}

/** The complete checkpoints in `dir`, highest step first. */
export function listCheckpoints(dir: string): CheckpointRef[] {
  return checkpointFolders(dir).map((folder) => ({ dir: folder, meta: readCheckpointMeta(folder) }));
}

/** The checkpoint with the highest step in `dir`, or null when there is none. */
export function latestCheckpoint(dir: string): CheckpointRef | null {
  const folder = checkpointFolders(dir)[0];
  return folder === undefined ? null : { dir: folder, meta: readCheckpointMeta(folder) };
}

export function readCheckpointMeta(folder: string): CheckpointMeta {
  const path = join(folder, CHECKPOINT_META);
  try {
    const meta = JSON.parse(readFileSync(path, 'utf8')) as CheckpointMeta;
    if (!Number.isInteger(meta.step) || !Number.isInteger(meta.policyVersion)) throw new Error('step and policyVersion must be integers');
    return meta;
  } catch (err) {
    throw new CheckpointError(`cannot read ${path}: ${(err as Error).message}`, path);
  }
}

/**
 * The weights a checkpoint holds, as engine.setWeights takes them: the PEFT adapter's tensors when the run trained
 * LoRA adapters, else the full model's.
 */
export async function readCheckpointWeights(folder: string): Promise<NamedTensors> {
  try {
    if (existsSync(join(folder, ADAPTER_CONFIG_FILE))) return (await readPeftAdapter(folder)).tensors;
    return (await readModelFolder(folder)).tensors;
  } catch (err) {
    throw new CheckpointError(`cannot read the weights in ${folder}: ${(err as Error).message}`, folder);
  }
}

/**
 * The engine source a restarted peer may load for `model`: its latest checkpoint when one exists, else the
 * configured source. Only for Hugging Face sources: a builtin model's checkpoint has no tokenizer files. The
 * training loop does not need it: on start it loads the latest checkpoint's weights into the engine itself.
 */
export function resumeSource(dataDir: string, model: string, configured: ModelSource): { source: ModelSource; checkpoint: CheckpointRef | null } {
  const checkpoint = latestCheckpoint(checkpointsDir(dataDir, model));
  return checkpoint ? { source: { kind: 'hf', path: checkpoint.dir }, checkpoint } : { source: configured, checkpoint: null };
}
