/**
 * `npm run pretrain:tiny`: the short SFT warm starts that produce the shipped builtin checkpoints
 * (worker/builtin/NAME/: config.json, model.safetensors in bf16, training.json).
 *
 *   builtin:tiny        calculator conversations, from random weights (the demo's model)
 *   builtin:tiny-guess  builtin:tiny's checkpoint, further trained on blind games of guess the number with the
 *                       calculator mix kept in (the multi-turn and cocktail scenarios' model); 101 s on a quiet machine
 *   builtin:tiny-team   builtin:tiny's checkpoint, further trained on the team's verifier turns (half-right
 *                       verdicts) with the calculator mix kept in (the team scenario's two models); a few minutes
 *
 * Deterministic: fixed seeds for the weights, the tasks and the demonstration mix. The model sees calculator
 * conversations in the builtin template (sft-corpus.ts) and learns the format: when to call `calc`, how to copy the
 * expression into the call, and how to copy the tool's result into the answer. Short copy drills in the first phase
 * are what make the copying emerge (around step 220 here; without them it had not by step 350). About 31 minutes
 * on a 2-core machine with the wasm backend; the held-out probes it prints are kept in training.json.
 *
 *   node --import tsx swarm/node/demo/pretrain.ts [--model tiny|tiny-guess] [--phases 600:1:1,100:0.3] [--batch N] [--lr X] [--out DIR]
 */
import '../../../p2p/polyfill.ts';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILTIN_SEED, builtinCheckpointDir, builtinConfig } from '../../../worker/builtin.ts';
import { createEngineFromWeights } from '../../../worker/engine.ts';
import { initWeights } from '../../../worker/model.ts';
import { readModelFolder, writeModelFolder } from '../../../worker/node/hf-folder.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { CALC_TOOL, makeTasks, rng } from './calc-format.ts';
import { GUESS_GAME, makeGuessTasks } from './guess-format.ts';
import { formatGuessProbe, formatProbe, type GuessProbeResult, probeCalculator, probeGuess, type ProbeResult } from './probe.ts';
import { copyDrill, demonstration, guessDemonstration, sftSample, verifierDemonstration } from './sft-corpus.ts';

/**
 * A phase of the warm start: `steps` steps in which `toolShare` of the demonstrations call the tool and the rest
 * answer directly (mostly wrongly: a tiny model cannot multiply, which is RL's room to improve).
 */
export interface PretrainPhase {
  steps: number;
  toolShare: number;
  /** Copy drills (sft-corpus.ts) added to each batch, as a share of the batch size. */
  drillShare: number;
  /** Games of guess the number added to each batch, as a share of the batch size (absent: none). */
  guessShare?: number;
  /** The team verifier's turns added to each batch, as a share of the batch size (absent: none). */
  verifierShare?: number;
}

export interface PretrainOptions {
  /** The builtin model written (worker/builtin.ts) and the weights it starts from: random, or a shipped checkpoint. */
  model: string;
  start: 'random' | { checkpoint: string };
  /** First the copying (every demonstration calls the tool), then the mix the demo starts from. */
  phases: PretrainPhase[];
  batch: number;
  learningRate: number;
  out: string;
  /** Probe the held-out tasks and save every this many steps (0: only at the end). */
  probeEvery: number;
  /** Seed of the demonstration mix (which tasks, which path). */
  mixSeed: number;
  /** In the games: the share of guesses made anywhere from 1 to max instead of in the range still possible. */
  strayShare: number;
}

export const DEFAULT_PRETRAIN: PretrainOptions = {
  model: 'tiny',
  start: 'random',
  phases: [
    { steps: 600, toolShare: 1, drillShare: 1 },
    { steps: 100, toolShare: 0.3, drillShare: 0 },
  ],
  batch: 16,
  learningRate: 3e-3,
  out: builtinCheckpointDir('tiny'),
  probeEvery: 100,
  mixSeed: 3,
  strayShare: 0.5,
};

/**
 * builtin:tiny-guess: the games are new to the model, the calculator is kept where builtin:tiny left it (its
 * second phase's mix), so that one model can be trained on both tasks at once (the cocktail scenario). Half of the
 * demonstrated guesses stray out of range: the warm start finds the secret in about half the games, halving finds
 * it in all of them.
 */
export const GUESS_PRETRAIN: PretrainOptions = {
  model: 'tiny-guess',
  start: { checkpoint: builtinCheckpointDir('tiny') },
  phases: [{ steps: 300, toolShare: 0.3, drillShare: 0, guessShare: 2 }],
  batch: 8,
  learningRate: 2e-3,
  out: builtinCheckpointDir('tiny-guess'),
  probeEvery: 100,
  mixSeed: 5,
  strayShare: 0.5,
};

/**
 * builtin:tiny-team: the proposer is the calculator agent (kept where builtin:tiny left it); the verifier's turns
 * are new. Half the demonstrated proposals are right, and 70% of the demonstrated verdicts: the warm start calls
 * the tool and says accept or reject, comparing only sometimes.
 */
export const TEAM_PRETRAIN: PretrainOptions = {
  ...GUESS_PRETRAIN,
  model: 'tiny-team',
  phases: [{ steps: 300, toolShare: 0.3, drillShare: 0, verifierShare: 1 }],
  out: builtinCheckpointDir('tiny-team'),
  mixSeed: 6,
};

/** Of the verifier's demonstrations: the share of right proposals, and of right verdicts. */
const VERIFIER_RIGHT_SHARE = 0.5;
const VERDICT_ACCURACY = 0.7;

export const PRETRAIN_PRESETS: Record<string, PretrainOptions> = { tiny: DEFAULT_PRETRAIN, 'tiny-guess': GUESS_PRETRAIN, 'tiny-team': TEAM_PRETRAIN };

/** Tasks the corpus draws from (never a held-out expression); the demo's train tasks use other seeds. */
const CORPUS_TASK_SEED = 7;
const PROBE_TASK_SEED = 11;
const GUESS_CORPUS_SEED = 13;
const GUESS_PROBE_SEED = 17;

export async function pretrainTiny(options: PretrainOptions, log: (line: string) => void = console.log): Promise<void> {
  const started = performance.now();
  const { tokenizer } = builtinTokenizerBundle();
  const { config, weights } =
    options.start === 'random'
      ? { config: builtinConfig(options.model), weights: initWeights(builtinConfig(options.model), BUILTIN_SEED) }
      : await readModelFolder(options.start.checkpoint).then((folder) => ({ config: folder.config, weights: folder.tensors }));
  const engine = await createEngineFromWeights({ name: `builtin:${options.model}`, config, weights, tokenizer, seed: BUILTIN_SEED });
  const tasks = makeTasks(50_000, CORPUS_TASK_SEED, 'corpus', false);
  const probeTasks = makeTasks(100, PROBE_TASK_SEED, 'probe', true);
  const games = makeGuessTasks(50_000, GUESS_CORPUS_SEED, 'corpus', false);
  const probeGames = makeGuessTasks(100, GUESS_PROBE_SEED, 'probe', true);
  const withGames = options.phases.some((p) => (p.guessShare ?? 0) > 0);
  const rand = rng(options.mixSeed);
  let lastLoss = NaN;
  const probes: Array<{ step: number; greedy: ProbeResult; sampled: ProbeResult; guess?: GuessProbeResult }> = [];
  const probeAndSave = async (stepsDone: number) => {
    const greedy = await probeCalculator(engine, probeTasks, 0);
    const sampled = await probeCalculator(engine, probeTasks, 1, stepsDone);
    const guess = withGames ? await probeGuess(engine, probeGames, 1, stepsDone) : undefined;
    probes.push({ step: stepsDone, greedy, sampled, ...(guess ? { guess } : {}) });
    log(formatProbe(`  step ${stepsDone} greedy `, greedy));
    log(formatProbe(`  step ${stepsDone} sampled`, sampled));
    if (guess) log(formatGuessProbe(`  step ${stepsDone} guess  `, guess));
    const tensors = await engine.getWeights();
    await mkdir(options.out, { recursive: true });
    await writeModelFolder(options.out, { config, tensors, dtype: 'BF16' });
    const record = {
      what: `SFT warm start of builtin:${options.model} on calculator conversations${withGames ? ' and games of guess the number' : ''} (swarm/node/demo/sft-corpus.ts)`,
      start: options.start === 'random' ? 'random weights' : 'builtin:tiny checkpoint',
      steps: stepsDone,
      phases: options.phases,
      batch: options.batch,
      learningRate: options.learningRate,
      seeds: { weights: BUILTIN_SEED, tasks: CORPUS_TASK_SEED, mix: options.mixSeed, probe: PROBE_TASK_SEED, ...(withGames ? { games: GUESS_CORPUS_SEED, gameProbe: GUESS_PROBE_SEED } : {}) },
      ...(withGames ? { game: GUESS_GAME, strayShare: options.strayShare } : {}),
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
  log(`pretraining builtin:${options.model} (${engine.info.paramCount} parameters, ${engine.info.backend.name}): ${steps} steps of ${options.batch} conversations`);
  for (let step = 0; step < steps; step++) {
    const { toolShare, drillShare, guessShare = 0, verifierShare = 0 } = phaseAt(step);
    const pick = () => tasks[Math.floor(rand() * tasks.length)];
    const pickGame = () => games[Math.floor(rand() * games.length)];
    const samples = [
      ...Array.from({ length: options.batch }, () => sftSample(demonstration(pick(), rand() < toolShare), [CALC_TOOL])),
      ...Array.from({ length: Math.round(options.batch * drillShare) }, () => sftSample(copyDrill(pick(), rand), undefined)),
      ...(await Promise.all(Array.from({ length: Math.round(options.batch * guessShare) }, () => guessDemonstration(pickGame(), rand, options.strayShare)))).map((m) => sftSample(m, undefined)),
      ...Array.from({ length: Math.round(options.batch * verifierShare) }, () => sftSample(verifierDemonstration(pick(), rand, VERIFIER_RIGHT_SHARE, VERDICT_ACCURACY), [CALC_TOOL])),
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
  const { values } = parseArgs({ options: { model: { type: 'string' }, phases: { type: 'string' }, batch: { type: 'string' }, out: { type: 'string' }, lr: { type: 'string' } } });
  const preset = PRETRAIN_PRESETS[values.model ?? 'tiny'];
  if (!preset) throw new Error(`--model: "${values.model}" has no warm start; the builtin models with one are ${Object.keys(PRETRAIN_PRESETS).join(', ')}`);
  // --phases 600:1:1,100:0.3 = 600 steps in which every demonstration calls the tool, with as many copy drills,
  // then 100 steps in which 30% do.
  const phases = values.phases?.split(',').map((p) => {
    const [steps, toolShare, drillShare = 0] = p.split(':').map(Number);
    if (!Number.isInteger(steps) || steps < 1 || !(toolShare >= 0 && toolShare <= 1) || !(drillShare >= 0)) throw new Error(`--phases: "${p}" is not STEPS:TOOL_SHARE[:DRILL_SHARE]`);
    return { steps, toolShare, drillShare };
  });
  await pretrainTiny({
    ...preset,
    ...(phases ? { phases } : {}),
    ...(values.batch ? { batch: Number(values.batch) } : {}),
    ...(values.lr ? { learningRate: Number(values.lr) } : {}),
    ...(values.out ? { out: values.out } : {}),
  });
}
