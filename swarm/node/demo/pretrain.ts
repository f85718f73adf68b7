/**
 * `npm run pretrain:tiny`: the short SFT warm start that produces the shipped builtin:tiny checkpoint
 * (worker/builtin/tiny/: config.json, model.safetensors in bf16, training.json).
 *
 * Deterministic: fixed seeds for the weights, the tasks and the demonstration mix. The model sees calculator
 * conversations in the builtin template (sft-corpus.ts) and learns the format: when to call `calc`, how to copy the
 * expression into the call, and how to copy the tool's result into the answer. Short copy drills in the first phase
 * are what make the copying emerge (around step 220 here; without them it had not by step 350). About 31 minutes
 * on a 2-core machine with the wasm backend; the held-out probes it prints are kept in training.json.
 *
 *   node --import tsx swarm/node/demo/pretrain.ts [--phases 600:1:1,100:0.3] [--batch N] [--lr X] [--out DIR]
 */
import '../../../p2p/polyfill.ts';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILTIN_SEED, builtinCheckpointDir, builtinConfig } from '../../../worker/builtin.ts';
import { createEngineFromWeights } from '../../../worker/engine.ts';
import { initWeights } from '../../../worker/model.ts';
import { writeModelFolder } from '../../../worker/node/hf-folder.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { makeTasks, rng } from './calc-format.ts';
import { formatProbe, probeCalculator, type ProbeResult } from './probe.ts';
import { copyDrill, demonstration, sftSample } from './sft-corpus.ts';

/**
 * A phase of the warm start: `steps` steps in which `toolShare` of the demonstrations call the tool and the rest
 * answer directly (mostly wrongly: a tiny model cannot multiply, which is RL's room to improve).
 */
export interface PretrainPhase {
  steps: number;
  toolShare: number;
  /** Copy drills (sft-corpus.ts) added to each batch, as a share of the batch size. */
  drillShare: number;
}

export interface PretrainOptions {
  /** First the copying (every demonstration calls the tool), then the mix the demo starts from. */
  phases: PretrainPhase[];
  batch: number;
  learningRate: number;
  out: string;
  /** Probe the held-out tasks and save every this many steps (0: only at the end). */
  probeEvery: number;
  /** Seed of the demonstration mix (which tasks, which path). */
  mixSeed: number;
}

export const DEFAULT_PRETRAIN: PretrainOptions = {
  phases: [
    { steps: 600, toolShare: 1, drillShare: 1 },
    { steps: 100, toolShare: 0.3, drillShare: 0 },
  ],
  batch: 16,
  learningRate: 3e-3,
  out: builtinCheckpointDir('tiny'),
  probeEvery: 100,
  mixSeed: 3,
};

/** Tasks the corpus draws from (never a held-out expression); the demo's train tasks use other seeds. */
const CORPUS_TASK_SEED = 7;
const PROBE_TASK_SEED = 11;

export async function pretrainTiny(options: PretrainOptions, log: (line: string) => void = console.log): Promise<void> {
  const started = performance.now();
  const config = builtinConfig('tiny');
  const { tokenizer } = builtinTokenizerBundle();
  const engine = await createEngineFromWeights({ name: 'builtin:tiny', config, weights: initWeights(config, BUILTIN_SEED), tokenizer, seed: BUILTIN_SEED });
  const tasks = makeTasks(50_000, CORPUS_TASK_SEED, 'corpus', false);
  const probeTasks = makeTasks(100, PROBE_TASK_SEED, 'probe', true);
  const rand = rng(options.mixSeed);
  let lastLoss = NaN;
  const probes: Array<{ step: number; greedy: ProbeResult; sampled: ProbeResult }> = [];
  const probeAndSave = async (stepsDone: number) => {
    const greedy = await probeCalculator(engine, probeTasks, 0);
    const sampled = await probeCalculator(engine, probeTasks, 1, stepsDone);
    probes.push({ step: stepsDone, greedy, sampled });
    log(formatProbe(`  step ${stepsDone} greedy `, greedy));
    log(formatProbe(`  step ${stepsDone} sampled`, sampled));
    const tensors = await engine.getWeights();
    await mkdir(options.out, { recursive: true });
    await writeModelFolder(options.out, { config, tensors, dtype: 'BF16' });
    const record = {
      what: 'SFT warm start of builtin:tiny on calculator conversations (swarm/node/demo/sft-corpus.ts)',
      steps: stepsDone,
      phases: options.phases,
      batch: options.batch,
      learningRate: options.learningRate,
      seeds: { weights: BUILTIN_SEED, tasks: CORPUS_TASK_SEED, mix: options.mixSeed, probe: PROBE_TASK_SEED },
      finalLoss: lastLoss,
      wallSeconds: Math.round((performance.now() - started) / 1000),
      backend: engine.info.backend.name,
      probes,
    };
    await writeFile(join(options.out, 'training.json'), JSON.stringify(record, null, 2) + '\n');
  };
  const steps = options.phases.reduce((a, p) => a + p.steps, 0);
  const phaseAt = (step: number) => {
    let end = 0;
    for (const phase of options.phases) if (step < (end += phase.steps)) return phase;
    return options.phases[options.phases.length - 1];
  };
  log(`pretraining builtin:tiny (${engine.info.paramCount} parameters, ${engine.info.backend.name}): ${steps} steps of ${options.batch} conversations`);
  for (let step = 0; step < steps; step++) {
    const { toolShare, drillShare } = phaseAt(step);
    const pick = () => tasks[Math.floor(rand() * tasks.length)];
    const samples = [
      ...Array.from({ length: options.batch }, () => sftSample(demonstration(pick(), rand() < toolShare))),
      ...Array.from({ length: Math.round(options.batch * drillShare) }, () => sftSample(copyDrill(pick(), rand))),
    ];
    const metrics = await engine.trainStep(samples, {
      loss: 'sft',
      learningRate: options.learningRate,
      microBatchTokens: 16_384,
      schedule: { kind: 'warmup-cosine', warmupSteps: 20, totalSteps: steps, minRatio: 0.1 },
    });
    lastLoss = metrics.loss;
    if ((step + 1) % 10 === 0) log(`step ${step + 1}/${steps} (tool share ${toolShare}, drills ${drillShare}) loss ${metrics.loss.toFixed(4)} (${(metrics.timeMs / 1000).toFixed(1)} s, ${Math.round((performance.now() - started) / 1000)} s total)`);
    if (options.probeEvery > 0 && (step + 1) % options.probeEvery === 0 && step + 1 < steps) await probeAndSave(step + 1);
  }
  await probeAndSave(steps);
  await engine.close();
  log(`wrote ${options.out} in ${Math.round((performance.now() - started) / 1000)} s`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { phases: { type: 'string' }, batch: { type: 'string' }, out: { type: 'string' }, lr: { type: 'string' } } });
  // --phases 600:1:1,100:0.3 = 600 steps in which every demonstration calls the tool, with as many copy drills,
  // then 100 steps in which 30% do.
  const phases = values.phases?.split(',').map((p) => {
    const [steps, toolShare, drillShare = 0] = p.split(':').map(Number);
    if (!Number.isInteger(steps) || steps < 1 || !(toolShare >= 0 && toolShare <= 1) || !(drillShare >= 0)) throw new Error(`--phases: "${p}" is not STEPS:TOOL_SHARE[:DRILL_SHARE]`);
    return { steps, toolShare, drillShare };
  });
  await pretrainTiny({
    ...DEFAULT_PRETRAIN,
    ...(phases ? { phases } : {}),
    ...(values.batch ? { batch: Number(values.batch) } : {}),
    ...(values.lr ? { learningRate: Number(values.lr) } : {}),
    ...(values.out ? { out: values.out } : {}),
  });
}
