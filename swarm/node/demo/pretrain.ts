/**
 * `npm run pretrain:tiny`: the short SFT warm start that produces the shipped builtin:tiny checkpoint
 * (worker/builtin/tiny/: config.json, model.safetensors in bf16, training.json).
 *
 * Deterministic: fixed seeds for the weights, the tasks and the demonstration mix. The model sees calculator
 * conversations in the builtin template (sft-corpus.ts) and learns the format: when to call `calc`, how to copy the
 * expression into the call, and how to copy the tool's result into the answer.
 *
 *   node --import tsx swarm/node/demo/pretrain.ts [--steps N] [--batch N] [--out DIR]
 */
import '../../../p2p/polyfill.ts';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILTIN_SEED, builtinCheckpointDir, builtinConfig } from '../../../worker/builtin.ts';
import type { DecoderConfig } from '../../../worker/common/engine.ts';
import { createEngineFromWeights } from '../../../worker/engine.ts';
import { initWeights } from '../../../worker/model.ts';
import { readModelFolder, writeModelFolder } from '../../../worker/node/hf-folder.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { makeTasks, rng } from './calc-format.ts';
import { demonstration, sftSample } from './sft-corpus.ts';

/**
 * Two layers are enough for the copying this format needs (a previous-token head feeding an induction head), and
 * every prompt carries the template's ~600-byte tool preamble, so attention over long rows is most of the cost.
 */
export const TINY_CONFIG: DecoderConfig = {
  ...builtinConfig('tiny'),
  num_hidden_layers: 2,
  hidden_size: 128,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 32,
  intermediate_size: 384,
};

export interface PretrainOptions {
  /** Steps on short rows (no tool preamble), then steps on the rows as served. */
  shortSteps: number;
  shortBatch: number;
  steps: number;
  batch: number;
  learningRate: number;
  /** Share of demonstrations that call the tool; the rest answer directly. */
  toolShare: number;
  out: string;
  /** Also save every this many steps (0: only at the end). */
  saveEvery: number;
  /** Continue from this checkpoint folder (fresh optimizer) instead of the random init. */
  from?: string;
  /** Seed of the demonstration mix (which tasks, which path). */
  mixSeed: number;
}

export const DEFAULT_PRETRAIN: PretrainOptions = {
  shortSteps: 200,
  shortBatch: 12,
  steps: 40,
  batch: 4,
  learningRate: 3e-3,
  toolShare: 0.3,
  out: builtinCheckpointDir('tiny'),
  saveEvery: 25,
  mixSeed: 3,
};

/**
 * The second phase: more steps on the rows as served, from phase one's saved (bf16) weights with a fresh
 * optimizer and other demonstrations, at a lower rate — the copying in long rows needs it.
 */
export const ADAPT_PRETRAIN: Omit<PretrainOptions, 'out'> = {
  shortSteps: 0,
  shortBatch: 0,
  steps: 30,
  batch: 4,
  learningRate: 1e-3,
  toolShare: 0.5,
  saveEvery: 10,
  mixSeed: 5,
};

/** Tasks the corpus draws from; the demo's held-out tasks use other seeds. */
const CORPUS_TASK_SEED = 7;

export async function pretrainTiny(options: PretrainOptions, log: (line: string) => void = console.log): Promise<void> {
  const started = performance.now();
  const { tokenizer } = builtinTokenizerBundle();
  const start = options.from ? await readModelFolder(options.from) : { config: TINY_CONFIG, tensors: initWeights(TINY_CONFIG, BUILTIN_SEED) };
  const engine = await createEngineFromWeights({ name: 'builtin:tiny', config: start.config, weights: start.tensors, tokenizer, seed: BUILTIN_SEED });
  const tasks = makeTasks(50_000, CORPUS_TASK_SEED, 'corpus');
  const rand = rng(options.mixSeed);
  let lastLoss = NaN;
  const save = async (stepsDone: number) => {
    const tensors = await engine.getWeights();
    await mkdir(options.out, { recursive: true });
    await writeModelFolder(options.out, { config: TINY_CONFIG, tensors, dtype: 'BF16' });
    const record = {
      what: 'SFT warm start of builtin:tiny on calculator conversations (swarm/node/demo/sft-corpus.ts)',
      shortSteps: options.shortSteps,
      shortBatch: options.shortBatch,
      steps: stepsDone,
      batch: options.batch,
      learningRate: options.learningRate,
      toolShare: options.toolShare,
      from: options.from ?? null,
      seeds: { weights: BUILTIN_SEED, tasks: CORPUS_TASK_SEED, mix: options.mixSeed },
      finalLoss: lastLoss,
      wallSeconds: Math.round((performance.now() - started) / 1000),
      backend: engine.info.backend.name,
    };
    await writeFile(join(options.out, 'training.json'), JSON.stringify(record, null, 2) + '\n');
  };
  const total = options.shortSteps + options.steps;
  log(`pretraining builtin:tiny (${engine.info.paramCount} parameters, ${engine.info.backend.name}): ${options.shortSteps} short steps of ${options.shortBatch}, then ${options.steps} steps of ${options.batch}`);
  for (let step = 0; step < total; step++) {
    const short = step < options.shortSteps;
    const samples = Array.from({ length: short ? options.shortBatch : options.batch }, () =>
      sftSample(demonstration(tasks[Math.floor(rand() * tasks.length)], rand() < options.toolShare), !short),
    );
    const metrics = await engine.trainStep(samples, {
      loss: 'sft',
      learningRate: options.learningRate,
      microBatchTokens: 16_384,
      schedule: { kind: 'warmup-cosine', warmupSteps: 10, totalSteps: total, minRatio: 0.1 },
    } as Parameters<typeof engine.trainStep>[1]);
    lastLoss = metrics.loss;
    log(`step ${step + 1}/${total}${short ? ' (short)' : ''} loss ${metrics.loss.toFixed(4)} (${(metrics.timeMs / 1000).toFixed(1)} s, ${Math.round((performance.now() - started) / 1000)} s total)`);
    if (options.saveEvery > 0 && (step + 1) % options.saveEvery === 0 && step + 1 < total) await save(step + 1);
  }
  await save(total);
  await engine.close();
  log(`wrote ${options.out} in ${Math.round((performance.now() - started) / 1000)} s`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { 'short-steps': { type: 'string' }, 'short-batch': { type: 'string' }, steps: { type: 'string' }, batch: { type: 'string' }, out: { type: 'string' }, lr: { type: 'string' }, 'adapt-only': { type: 'boolean' } } });
  const out = values.out ?? DEFAULT_PRETRAIN.out;
  if (!values['adapt-only']) await pretrainTiny({
    ...DEFAULT_PRETRAIN,
    ...(values['short-steps'] ? { shortSteps: Number(values['short-steps']) } : {}),
    ...(values['short-batch'] ? { shortBatch: Number(values['short-batch']) } : {}),
    ...(values.steps ? { steps: Number(values.steps) } : {}),
    ...(values.batch ? { batch: Number(values.batch) } : {}),
    ...(values.lr ? { learningRate: Number(values.lr) } : {}),
    out,
  });
  // Phase two reads phase one's folder back, so a run from scratch and a resumed one see the same bf16 weights.
  await pretrainTiny({ ...ADAPT_PRETRAIN, from: out, out });
}
