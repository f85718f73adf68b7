/**
 * `npm run pretrain:tiny`: the short SFT warm starts that produce the shipped builtin checkpoints
 * (worker/builtin/NAME/: config.json, model.safetensors in bf16, training.json).
 *
 *   builtin:tiny        calculator conversations, from random weights (the demo's model)
 *   builtin:tiny-guess  builtin:tiny's checkpoint, further trained on blind games of guess the number with the
 *                       calculator mix kept in (the multi-turn and cocktail scenarios' model); 101 s on a quiet machine
 *   builtin:tiny-team   builtin:tiny's checkpoint, further trained on short-prompt tool turns with the calculator
 *                       mix kept in (the team scenario's proposer); 90 s
 *   builtin:tiny-verifier  builtin:tiny-team's checkpoint, further trained on the team's verifier turns (a check
 *                       of each proposal, then a verdict that follows it 85% of the time); 13 minutes under load
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
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import { BUILTIN_SEED, builtinCheckpointDir, builtinConfig } from '../../../worker/builtin.ts';
import { createEngineFromWeights } from '../../../worker/engine.ts';
import { initWeights } from '../../../worker/model.ts';
import { readModelFolder, writeModelFolder } from '../../../worker/node/hf-folder.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { CALC_TOOL, makeTasks, rng } from './calc-format.ts';
import { GUESS_GAME, makeGuessTasks } from './guess-format.ts';
import { formatGuessProbe, formatProbe, formatVerifierProbe, type GuessProbeResult, probeCalculator, probeGuess, type ProbeResult, probeVerifier, type VerifierProbeResult } from './probe.ts';
import { copyDrill, demonstration, guessDemonstration, recomputeDemonstration, sftSample, verifierDemonstration } from './sft-corpus.ts';

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
  /** builtin:tiny-team's short-prompt turns (sft-corpus.ts recomputeDemonstration), likewise. */
  recomputeShare?: number;
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
 * builtin:tiny-team, the proposer's warm start: the calculator kept where builtin:tiny left it, and turns under a
 * short system prompt that call `calc` on the question's expression (the team's first verifier's, with verdicts
 * right in 70% of them) — the proposer's prompt is short too.
 */
export const TEAM_PRETRAIN: PretrainOptions = {
  ...GUESS_PRETRAIN,
  model: 'tiny-team',
  phases: [{ steps: 300, toolShare: 0.3, drillShare: 0, recomputeShare: 1 }],
  out: builtinCheckpointDir('tiny-team'),
  mixSeed: 6,
};

/**
 * builtin:tiny-verifier, the verifier's warm start: from the proposer's checkpoint (its tool call under a short
 * prompt), the verifier's checks of half-right proposals, with verdicts that follow the check in 85% of them.
 * A model of its own: trained on checks, the proposer's expression copying suffered (12% right against 41%).
 */
export const VERIFIER_PRETRAIN: PretrainOptions = {
  ...GUESS_PRETRAIN,
  model: 'tiny-verifier',
  start: { checkpoint: builtinCheckpointDir('tiny-team') },
  // Copying the proposal into the check is the slow part: with two checks a conversation, 33% of the greedy checks
  // were right at step 300, 50% at 600, 75% at 900, 98% at 1,200 (92% sampled).
  phases: [{ steps: 1200, toolShare: 0.3, drillShare: 0, verifierShare: 2 }],
  probeEvery: 300,
  out: builtinCheckpointDir('tiny-verifier'),
  mixSeed: 8,
};

/** Of the team's demonstrations: the share of right proposals. */
const TEAM_RIGHT_SHARE = 0.5;
/** Of tiny-team's short-prompt turns: the share of right verdicts (as shipped). */
const RECOMPUTE_VERDICT_ACCURACY = 0.7;
/**
 * Of the verifier's: the share of verdicts that follow the check. At 70% the warm start did not condition its verdict
 * on the check at all (it accepted 33% of right and 37% of wrong proposals): following gains SFT only 0.08 nats a
 * verdict over a constant guess, too little against the rest of the loss.
 */
const VERIFIER_FOLLOW_SHARE = 0.85;

export const PRETRAIN_PRESETS: Record<string, PretrainOptions> = { tiny: DEFAULT_PRETRAIN, 'tiny-guess': GUESS_PRETRAIN, 'tiny-team': TEAM_PRETRAIN, 'tiny-verifier': VERIFIER_PRETRAIN };

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
  const withChecks = options.phases.some((p) => (p.verifierShare ?? 0) > 0);
  const rand = rng(options.mixSeed);
  let lastLoss = NaN;
  const probes: Array<{ step: number; greedy: ProbeResult; sampled: ProbeResult; guess?: GuessProbeResult; verifier?: { greedy: VerifierProbeResult; sampled: VerifierProbeResult } }> = [];
  const probeAndSave = async (stepsDone: number) => {
    const greedy = await probeCalculator(engine, probeTasks, 0);
    const sampled = await probeCalculator(engine, probeTasks, 1, stepsDone);
    const guess = withGames ? await probeGuess(engine, probeGames, 1, stepsDone) : undefined;
    const verifier = withChecks ? { greedy: await probeVerifier(engine, probeTasks, 0), sampled: await probeVerifier(engine, probeTasks, 1, stepsDone) } : undefined;
    probes.push({ step: stepsDone, greedy, sampled, ...(guess ? { guess } : {}), ...(verifier ? { verifier } : {}) });
    log(formatProbe(`  step ${stepsDone} greedy `, greedy));
    log(formatProbe(`  step ${stepsDone} sampled`, sampled));
    if (guess) log(formatGuessProbe(`  step ${stepsDone} guess  `, guess));
    if (verifier) {
      log(formatVerifierProbe(`  step ${stepsDone} verifier greedy `, verifier.greedy));
      log(formatVerifierProbe(`  step ${stepsDone} verifier sampled`, verifier.sampled));
    }
    const tensors = await engine.getWeights();
    await mkdir(options.out, { recursive: true });
    await writeModelFolder(options.out, { config, tensors, dtype: 'BF16' });
    const record = {
      what: `SFT warm start of builtin:${options.model} on calculator conversations${withGames ? ' and games of guess the number' : ''}${withChecks ? " and the team verifier's checks" : ''} (swarm/node/demo/sft-corpus.ts)`,
      start: options.start === 'random' ? 'random weights' : `builtin:${basename(options.start.checkpoint)} checkpoint`,
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
    const { toolShare, drillShare, guessShare = 0, verifierShare = 0, recomputeShare = 0 } = phaseAt(step);
    const pick = () => tasks[Math.floor(rand() * tasks.length)];
    const pickGame = () => games[Math.floor(rand() * games.length)];
    const samples = [
      ...Array.from({ length: options.batch }, () => sftSample(demonstration(pick(), rand() < toolShare), [CALC_TOOL])),
      ...Array.from({ length: Math.round(options.batch * drillShare) }, () => sftSample(copyDrill(pick(), rand), undefined)),
      ...(await Promise.all(Array.from({ length: Math.round(options.batch * guessShare) }, () => guessDemonstration(pickGame(), rand, options.strayShare)))).map((m) => sftSample(m, undefined)),
      ...Array.from({ length: Math.round(options.batch * recomputeShare) }, () => sftSample(recomputeDemonstration(pick(), rand, TEAM_RIGHT_SHARE, RECOMPUTE_VERDICT_ACCURACY), [CALC_TOOL])),
      ...Array.from({ length: Math.round(options.batch * verifierShare) }, () => sftSample(verifierDemonstration(pick(), rand, TEAM_RIGHT_SHARE, VERIFIER_FOLLOW_SHARE), [CALC_TOOL])),
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
