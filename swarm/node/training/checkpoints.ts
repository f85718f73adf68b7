/**
 * Checkpoints of a model's training loop: `<dataDir>/checkpoints/<model>/step-<n>/` holds everything the next step
 * depends on, so that a resumed run continues the run that stopped:
 * - what engine.save wrote: the weights (config.json + model.safetensors, or a PEFT adapter);
 * - `optimizer.safetensors`: AdamW's moments (`m/<variable>`, `v/<variable>`) and, in its metadata, its step count,
 *   which is also the learning-rate schedule's position;
 * - `checkpoint.json`: step, policy version, time, metrics, and where the KL reference comes from (the weights
 *   training started from: the model's configured source, taken before the checkpoint's weights are loaded).
 * The sampler keeps no state between requests (each has its own seed), so there is none to save.
 * The folder is written under a temporary name, its files flushed to disk, and renamed when complete, so a crash
 * mid-save never leaves a half checkpoint that a restart would pick up (a folder without `checkpoint.json`, or
 * with a `.partial` name, is never listed).
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ModelSource, NamedTensors, OptimizerState, TrainerEngine } from '../../../worker/common/engine.ts';
import { parseSafetensors, serializeSafetensors } from '../../../worker/checkpoint/safetensors.ts';
import { ADAPTER_CONFIG_FILE, readModelFolder, readPeftAdapter } from '../../../worker/node/hf-folder.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import { CheckpointError } from './errors.ts';

export const CHECKPOINT_META = 'checkpoint.json';
/** The optimizer's moments and step count (see the module comment). */
export const OPTIMIZER_FILE = 'optimizer.safetensors';
const OPTIMIZER_STEP_KEY = 'optimizer_step';

export interface CheckpointMeta {
  model: string;
  step: number;
  policyVersion: number;
  time: string;
  metrics: TrainStepSummary['metrics'];
  files: string[];
  /**
   * Where the KL reference comes from: 'initial-weights' (the weights training started from, i.e. the model's
   * configured source) when the run trains with a KL term, else null. Absent in checkpoints from before this field.
   */
  reference?: 'initial-weights' | null;
}

export interface CheckpointRef {
  dir: string;
  meta: CheckpointMeta;
}

/** `<dataDir>/checkpoints/<model>`; the model name is made safe for a folder name. */
export function checkpointsDir(dataDir: string, model: string): string {
  return join(dataDir, 'checkpoints', model.replace(/[^A-Za-z0-9._-]/g, '_'));
}

/**
 * Writes the engine's weights and optimizer state and `meta` as checkpoint `step-<meta.step>` in `dir`, atomically:
 * on any failure nothing new is listed (the partial folder is removed) and the error is rethrown.
 */
export async function saveCheckpoint(
  engine: TrainerEngine,
  dir: string,
  meta: Omit<CheckpointMeta, 'files'>,
): Promise<CheckpointRef> {
  const final = join(dir, `step-${meta.step}`);
  const partial = `${final}.partial`;
  try {
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    const { files } = await engine.save(partial);
    writeFileSync(join(partial, OPTIMIZER_FILE), serializeOptimizerState(await engine.getOptimizerState()));
    const full: CheckpointMeta = { ...meta, files: [...files, OPTIMIZER_FILE] };
    writeFileSync(join(partial, CHECKPOINT_META), JSON.stringify(full, null, 2) + '\n');
    // Flushed before the rename: after a power cut the renamed folder must not point at unwritten data.
    for (const file of readdirSync(partial)) fsync(join(partial, file));
    rmSync(final, { recursive: true, force: true });
    renameSync(partial, final);
    fsync(dirname(final));
    return { dir: final, meta: full };
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
}

function fsync(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Removes a checkpoint folder (one a restart found ahead of the recorded steps: its step never completed). */
export function removeCheckpoint(folder: string): void {
  rmSync(folder, { recursive: true, force: true });
}

function serializeOptimizerState(state: OptimizerState): Uint8Array {
  const tensors: NamedTensors = {};
  for (const [name, t] of Object.entries(state.m)) tensors[`m/${name}`] = t;
  for (const [name, t] of Object.entries(state.v)) tensors[`v/${name}`] = t;
  return serializeSafetensors(tensors, { metadata: { [OPTIMIZER_STEP_KEY]: String(state.step) } });
}

/** The optimizer state a checkpoint holds, or null for a checkpoint written before they held one. */
export async function readCheckpointOptimizer(folder: string): Promise<OptimizerState | null> {
  const path = join(folder, OPTIMIZER_FILE);
  if (!existsSync(path)) return null;
  try {
    const { tensors, metadata } = parseSafetensors(await readFile(path));
    const step = Number(metadata[OPTIMIZER_STEP_KEY]);
    if (!Number.isInteger(step) || step < 0) throw new Error(`${OPTIMIZER_STEP_KEY} must be a non-negative integer`);
    const state: OptimizerState = { step, m: {}, v: {} };
    for (const [key, t] of Object.entries(tensors)) {
      const slash = key.indexOf('/');
      const which = key.slice(0, slash);
      if (which !== 'm' && which !== 'v') throw new Error(`unexpected tensor ${key}`);
      state[which][key.slice(slash + 1)] = { shape: t.shape, data: t.data };
    }
    return state;
  } catch (err) {
    throw new CheckpointError(`cannot read ${path}: ${(err as Error).message}`, path);
  }
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

/** The newest checkpoint of a step after `afterStep` (a fresh run's own: its offset), or null. */
export function latestCheckpoint(dir: string, afterStep = 0): CheckpointRef | null {
  const folder = checkpointFolders(dir)[0];
  if (folder === undefined) return null;
  const meta = readCheckpointMeta(folder);
  return meta.step > afterStep ? { dir: folder, meta } : null;
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
