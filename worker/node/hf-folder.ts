/**
 * Hugging Face model folders on disk: config.json + model.safetensors (or sharded safetensors with an index), and
 * PEFT LoRA adapters (adapter_config.json + adapter_model.safetensors). Files are written atomically.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { DecoderConfig, NamedTensors } from '../common/engine.ts';
import { checkDecoderTensors } from '../checkpoint/decoder-tensors.ts';
import { MissingTensorError, ModelFolderError, SafetensorsFormatError } from '../checkpoint/errors.ts';
import { parseDecoderConfig, toHfConfigJson } from '../checkpoint/hf-config.ts';
import { parsePeftAdapterConfig, type PeftAdapterConfig } from '../checkpoint/peft-config.ts';
import { parseSafetensors, serializeSafetensors, type SafetensorsDtype } from '../checkpoint/safetensors.ts';

export const CONFIG_FILE = 'config.json';
export const WEIGHTS_FILE = 'model.safetensors';
export const WEIGHTS_INDEX_FILE = 'model.safetensors.index.json';
export const ADAPTER_CONFIG_FILE = 'adapter_config.json';
export const ADAPTER_WEIGHTS_FILE = 'adapter_model.safetensors';

const TORCH_DTYPE: Record<SafetensorsDtype, string> = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' };
const SAFETENSORS_METADATA = { format: 'pt' };

export interface ModelFolder {
  config: DecoderConfig;
  tensors: NamedTensors;
  /** The dtype most of the weights were stored in (they are float32 in memory). */
  dtype: SafetensorsDtype;
}

/**
 * Reads a model folder. Every tensor the config calls for must be present with its shape (MissingTensorError,
 * TensorShapeError) unless `checkTensors` is false.
 */
export async function readModelFolder(
  dir: string,
  options: { checkTensors?: boolean } = {},
): Promise<ModelFolder> {
  const config = parseDecoderConfig(await readJson(join(dir, CONFIG_FILE)));
  const loaded = (await exists(join(dir, WEIGHTS_FILE)))
    ? await readSafetensorsFile(join(dir, WEIGHTS_FILE))
    : await readShardedWeights(dir);
  if (options.checkTensors ?? true) checkDecoderTensors(config, loaded.tensors);
  return { config, ...loaded };
}

async function readShardedWeights(dir: string): Promise<{ tensors: NamedTensors; dtype: SafetensorsDtype }> {
  const indexPath = join(dir, WEIGHTS_INDEX_FILE);
  if (!(await exists(indexPath)))
    throw new ModelFolderError(`no ${WEIGHTS_FILE} and no ${WEIGHTS_INDEX_FILE} in ${dir}`, dir);
  const index = await readJson(indexPath);
  const weightMap = (index as { weight_map?: unknown } | null)?.weight_map;
  if (
    weightMap === null ||
    typeof weightMap !== 'object' ||
    Array.isArray(weightMap) ||
    !Object.values(weightMap).every((f) => typeof f === 'string')
  ) {
    throw new ModelFolderError(
      `${WEIGHTS_INDEX_FILE} has no weight_map of tensor name → shard file`,
      indexPath,
    );
  }
  const shardByTensor = weightMap as Record<string, string>;
  const tensors: NamedTensors = {};
  const dtypeCounts = new Map<SafetensorsDtype, number>();
  // One shard at a time, so only one shard's raw bytes are held besides the float32 tensors.
  for (const shard of new Set(Object.values(shardByTensor))) {
    const shardPath = join(dir, checkFlatFileName(shard, indexPath));
    if (!(await exists(shardPath)))
      throw new ModelFolderError(`shard ${shard} named in ${WEIGHTS_INDEX_FILE} is missing`, shardPath);
    const loaded = await readSafetensorsFile(shardPath, dtypeCounts);
    Object.assign(tensors, loaded.tensors);
  }
  for (const [name, shard] of Object.entries(shardByTensor)) {
    if (!tensors[name]) throw new MissingTensorError(name, shard);
  }
  return { tensors, dtype: mostCommon(dtypeCounts) };
}

/** Reads one safetensors file; `dtypeCounts` accumulates element counts per stored dtype across files. */
async function readSafetensorsFile(
  path: string,
  dtypeCounts = new Map<SafetensorsDtype, number>(),
): Promise<{ tensors: NamedTensors; dtype: SafetensorsDtype }> {
  const bytes = await readFile(path);
  let parsed;
  try {
    parsed = parseSafetensors(bytes);
  } catch (error) {
    if (error instanceof SafetensorsFormatError)
      throw new SafetensorsFormatError(`${basename(path)}: ${error.message}`);
    throw error;
  }
  const tensors: NamedTensors = {};
  for (const [name, { dtype, shape, data }] of Object.entries(parsed.tensors)) {
    tensors[name] = { shape, data };
    dtypeCounts.set(dtype, (dtypeCounts.get(dtype) ?? 0) + data.length);
  }
  return { tensors, dtype: mostCommon(dtypeCounts) };
}

export interface WriteModelFolderOptions {
  config: DecoderConfig;
  tensors: NamedTensors;
  /** Storage dtype; default F32 (bit-exact). */
  dtype?: SafetensorsDtype;
  /** Extra files copied in as they are, e.g. { 'tokenizer.json': text, 'tokenizer_config.json': text }. */
  tokenizerFiles?: Record<string, string | Uint8Array>;
}

/** Writes config.json, model.safetensors and the tokenizer files into `dir` (created if needed). */
export async function writeModelFolder(
  dir: string,
  options: WriteModelFolderOptions,
): Promise<{ files: string[] }> {
  const dtype = options.dtype ?? 'F32';
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  // Weights before config: a folder whose config.json is present has its weights too.
  files.push(
    await writeFileAtomic(
      dir,
      WEIGHTS_FILE,
      serializeSafetensors(options.tensors, { dtype, metadata: SAFETENSORS_METADATA }),
    ),
  );
  for (const [name, contents] of Object.entries(options.tokenizerFiles ?? {})) {
    files.push(await writeFileAtomic(dir, checkFlatFileName(name, dir), contents));
  }
  files.push(
    await writeFileAtomic(
      dir,
      CONFIG_FILE,
      jsonText(toHfConfigJson(options.config, { torchDtype: TORCH_DTYPE[dtype] })),
    ),
  );
  return { files };
}

export interface PeftAdapter {
  config: PeftAdapterConfig;
  /** Tensors in PEFT naming, e.g. "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight". */
  tensors: NamedTensors;
  dtype: SafetensorsDtype;
}

export async function readPeftAdapter(dir: string): Promise<PeftAdapter> {
  const config = parsePeftAdapterConfig(await readJson(join(dir, ADAPTER_CONFIG_FILE)));
  const weightsPath = join(dir, ADAPTER_WEIGHTS_FILE);
  if (!(await exists(weightsPath)))
    throw new ModelFolderError(`${ADAPTER_WEIGHTS_FILE} is missing in ${dir}`, weightsPath);
  return { config, ...(await readSafetensorsFile(weightsPath)) };
}

export async function writePeftAdapter(
  dir: string,
  adapter: { config: PeftAdapterConfig; tensors: NamedTensors; dtype?: SafetensorsDtype },
): Promise<{ files: string[] }> {
  const config = parsePeftAdapterConfig(adapter.config);
  await mkdir(dir, { recursive: true });
  const weights = serializeSafetensors(adapter.tensors, {
    dtype: adapter.dtype ?? 'F32',
    metadata: SAFETENSORS_METADATA,
  });
  return {
    files: [
      await writeFileAtomic(dir, ADAPTER_WEIGHTS_FILE, weights),
      await writeFileAtomic(dir, ADAPTER_CONFIG_FILE, jsonText(config)),
    ],
  };
}

/** Write to a temporary name beside the target, then rename: readers see the old file or the new one, never half. */
async function writeFileAtomic(dir: string, name: string, contents: string | Uint8Array): Promise<string> {
  const target = join(dir, name);
  const temporary = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(temporary, contents);
    await rename(temporary, target);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
  return target;
}

async function readJson(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'is missing' : 'cannot be read';
    throw new ModelFolderError(`${basename(path)} ${reason}: ${path}`, path);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ModelFolderError(`${basename(path)} is not valid JSON: ${(error as Error).message}`, path);
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/** File names from an index or a caller must stay inside the folder. */
function checkFlatFileName(name: string, context: string): string {
  if (name === '' || name !== basename(name) || name === '.' || name === '..')
    throw new ModelFolderError(`"${name}" is not a plain file name`, context);
  return name;
}

function mostCommon(counts: Map<SafetensorsDtype, number>): SafetensorsDtype {
  let best: SafetensorsDtype = 'F32';
  let bestCount = -1;
  for (const [dtype, count] of counts) {
    if (count > bestCount) [best, bestCount] = [dtype, count];
  }
  return best;
}

function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
