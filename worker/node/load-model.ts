/**
 * Turns EngineOptions into an engine on this thread: reads the model (builtin or a Hugging Face folder), its
 * tokenizer and optional PEFT adapter from disk, and gives the engine a checkpoint writer.
 */
import { access, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { BUILTIN_SEED, builtinCheckpointDir, builtinConfig } from '../builtin.ts';
import { loraFromPeftConfig } from '../checkpoint/peft-config.ts';
import type { DecoderConfig, ModelSource, NamedTensors } from '../common/engine.ts';
import type { EngineOptions } from '../common/protocol.ts';
import { type CheckpointWriter, createEngineFromWeights, type EngineInit, type LocalEngine } from '../engine.ts';
import { initWeights } from '../model.ts';
import type { Tokenizer } from '../tokenizer/types.ts';
import { CONFIG_FILE, readModelFolder, readPeftAdapter, writeModelFolder, writePeftAdapter } from './hf-folder.ts';
import { loadTokenizer } from './load-tokenizer.ts';

/** Tokenizer files copied into saved model folders so they load again as `{ kind: 'hf' }`. */
const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'];

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function tokenizerFor(source: ModelSource): Promise<Tokenizer | null> {
  try {
    return (await loadTokenizer(source)).tokenizer;
  } catch (err) {
    // A weights-only folder still samples and trains; only stop strings need the tokenizer.
    if ((err as Error).name === 'TokenizerLoadError') return null;
    throw err;
  }
}

function writerFor(source: ModelSource): CheckpointWriter {
  return {
    async writeModel(dir, config, tensors) {
      const tokenizerFiles: Record<string, string> = {};
      if (source.kind === 'hf') {
        for (const f of TOKENIZER_FILES) if (await exists(join(source.path, f))) tokenizerFiles[f] = await readFile(join(source.path, f), 'utf8');
      }
      return writeModelFolder(dir, { config, tensors, tokenizerFiles });
    },
    writeAdapter: (dir, config, tensors) => writePeftAdapter(dir, { config, tensors }),
  };
}

/** A source's name, config and weights, as an engine starts from them (also a LoRA run's frozen base). */
export async function readSourceWeights(source: ModelSource): Promise<{ name: string; config: DecoderConfig; weights: NamedTensors }> {
  let name: string;
  let config: DecoderConfig;
  let weights: NamedTensors;
  if (source.kind === 'builtin') {
    name = `builtin:${source.name}`;
    config = builtinConfig(source.name);
    const shipped = builtinCheckpointDir(source.name);
    if (await exists(join(shipped, CONFIG_FILE))) {
      ({ config, tensors: weights } = await readModelFolder(shipped));
    } else {
      weights = initWeights(config, BUILTIN_SEED);
    }
  } else {
    name = basename(source.path);
    ({ config, tensors: weights } = await readModelFolder(source.path));
  }
  return { name, config, weights };
}

export async function loadEngineInit(options: EngineOptions): Promise<EngineInit> {
  const { source } = options;
  const { name, config, weights } = await readSourceWeights(source);
  let lora = options.lora ?? null;
  let adapter: NamedTensors | null = null;
  if (options.adapterPath) {
    const peft = await readPeftAdapter(options.adapterPath);
    lora ??= loraFromPeftConfig(peft.config);
    adapter = peft.tensors;
  }
  return { name, config, weights, tokenizer: await tokenizerFor(source), lora, adapter, backend: options.backend, seed: options.seed, precision: options.precision, writer: writerFor(source) };
}

/** The engine on the calling thread (tests, benchmarks); `startEngine` runs the same in a worker thread. */
export async function createEngine(options: EngineOptions): Promise<LocalEngine> {
  return createEngineFromWeights(await loadEngineInit(options));
}
