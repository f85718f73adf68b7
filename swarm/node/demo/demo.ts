/**
 * The demo: one peer with a model, the calculator agent attached through the client runner, and the real training
 * loop in between.
 *
 *   eval before  every held-out task once (eval episodes: never trained on)
 *   train        train tasks in GRPO groups until the loop has done `steps` optimizer steps
 *   eval after   the same held-out tasks again, on the trained weights
 *
 * Everything goes through the product's own paths: the agent is a child process speaking OpenAI to the gateway,
 * rewards come from the example's grader, samples from the merged timelines in the store.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join, resolve } from 'node:path';
import type { NamedTensors, TrainLoss } from '../../../worker/common/engine.ts';
import type { AttachClientRequest, ClientRunRecord } from '../../common/runner-api.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import { DEFAULT_POOL_LIMIT, type HostedModel } from '../models/model-host.ts';
import { defaultModelName, parseModelSource } from '../models/model-spec.ts';
import { createSwarmToken } from '../../../p2p/index.ts';
import { PeerRuntime } from '../runtime.ts';
import { latestRunOfModel } from '../store/training-runs.ts';
import type { TrainingConfigOverrides } from '../training/config.ts';
import { sqliteTrainingStore } from '../training/sqlite-training-store.ts';
import { splitUserTasks, writeCalculatorTasks, type TaskFiles } from './task-files.ts';
import { clientPeerProcess, type DemoRunner, inProcessRunner, settled } from './demo-runner.ts';

export class DemoError extends Error {
  override name = 'DemoError';
}

const repoFile = (path: string) => fileURLToPath(new URL(`../../../${path}`, import.meta.url));

export const DEFAULT_AGENT = repoFile('examples/calculator/agent.ts');
export const DEFAULT_REWARD = repoFile('examples/calculator/reward.ts');

export interface DemoOptions {
  /** Optimizer steps to train. */
  steps: number;
  /** `builtin:tiny` or a Hugging Face model folder. */
  model: string;
  /** The run folder (report, plots, task files, the peer's data). */
  out: string;
  /** Agent script, task file (JSONL; tasks with "split": "eval" are held out) and grader; default: the calculator. */
  script: string;
  tasks?: string;
  reward?: string;
  /** Held-out and train tasks generated for the calculator when no task file is given. */
  evalTasks: number;
  trainTasks: number;
  batchTasks: number;
  groupSize: number;
  learningRate: number;
  /** Weight of the KL penalty towards the starting weights (0: off, and the KL plot stays flat). */
  klCoef: number;
  /**
   * Eval episodes sample at this temperature (0: greedy). Default 1: the policy as it is trained, so that the
   * success rate is the expected reward RL optimises, not the fate of one argmax path.
   */
  evalTemperature: number;
  /** Episodes in flight during evaluation. */
  evalConcurrency: number;
  /** Seed of the generated tasks. */
  seed: number;
  /** Give up (DemoError) when training makes no step for this long, e.g. every group's rewards are equal. */
  stallTimeoutS: number;
  /** Run the agents in a second peer process (a swarm client) that reaches the model over the swarm. */
  twoProcess: boolean;
  /** Asynchronous training's staleness bound η (training.staleness; default 0, synchronous). */
  staleness?: number;
  /** The policy loss (training.train.loss; default ppo). */
  loss?: TrainLoss;
}

export const DEFAULT_DEMO: DemoOptions = {
  steps: 15,
  model: 'builtin:tiny',
  out: '',
  script: DEFAULT_AGENT,
  reward: DEFAULT_REWARD,
  evalTasks: 100,
  trainTasks: 2000,
  batchTasks: 4,
  groupSize: 4,
  learningRate: 5e-4,
  klCoef: 0.001,
  evalTemperature: 1,
  evalConcurrency: 25,
  seed: 2026,
  stallTimeoutS: 600,
  twoProcess: false,
};

export interface EvalResult {
  episodes: number;
  /**
   * Held-out episodes with reward ≥ 1 over all of them (aborted ones count as failures); the calculator's grader gives
   * reward 1 exactly when it reports success.
   */
  successRate: number;
  meanReward: number;
  aborted: number;
  wallS: number;
}

export interface StepRecord extends TrainStepSummary {
  /** Seconds since training started, when the step finished. */
  wallS: number;
  /**
   * Share of the train episodes finished since the previous step whose own `success` is true (all rollouts, not only
   * the batch trained on: the step's own `successRate` is the batch's).
   */
  rolloutSuccessRate: number;
  /** Tokens the trainer processed per second of its own step time. */
  trainerTokensPerS: number;
  /** Generated + trained tokens over the wall time since the previous step (rollouts included). */
  endToEndTokensPerS: number;
  /** Σ naive tokens ÷ Σ merged tokens of the episodes finished since the previous step. */
  mergeTokenRatio: number;
  /** LLM calls per train episode finished since the previous step (for the calculator: 2 = used the tool). */
  callsPerEpisode: number;
}

export interface DemoResult {
  steps: number;
  wall_s: number;
  episodes: number;
  eval_before: number;
  eval_after: number;
  merge_token_ratio: number;
  backend: string;
  model: string;
  policyVersionBefore: number;
  policyVersionAfter: number;
  /** Whether training changed the model's weights (compared tensor by tensor). */
  weightsChanged: boolean;
  /** Where the agents ran: this process, or the client peer process (--two-process). */
  agentsRun: string;
  evalBefore: EvalResult;
  evalAfter: EvalResult;
  stepRecords: StepRecord[];
  options: DemoOptions;
  outDir: string;
  /** The peer's data dir inside the run folder (`agentjet node|runs … --data-dir` open it). */
  dataDir: string;
  /** The hosted model's name and the training run the demo recorded in the store. */
  modelName: string;
  runId: string | null;
}

/** What the demo reports while it runs (the CLI draws progress bars from it). */
export type DemoProgress =
  | { phase: 'start'; model: string; backend: string; uiUrl: string; agentsRun: string; dataDir: string }
  | { phase: 'eval'; label: 'before' | 'after'; done: number; total: number; successRate: number }
  | { phase: 'train-start'; total: number }
  | { phase: 'train'; step: number; total: number; record: StepRecord }
  | { phase: 'done'; result: DemoResult };

/** The peer's data dir of a demo run: inside its run folder, so the folder holds everything the run made. */
export function demoDataDir(options: Pick<DemoOptions, 'out'>): string {
  return join(resolve(options.out), 'peer');
}

export async function runDemo(options: DemoOptions, onProgress: (p: DemoProgress) => void = () => {}): Promise<DemoResult> {
  const started = performance.now();
  const outDir = resolve(options.out);
  mkdirSync(outDir, { recursive: true });
  const files = options.tasks ? await splitUserTasks(outDir, options.tasks) : writeCalculatorTasks(outDir, options);

  const source = parseModelSource(options.model);
  const modelName = defaultModelName(source);
  // Two processes: a private swarm of two peers on this machine (loopback only, no mDNS).
  const swarmToken = options.twoProcess ? createSwarmToken({ name: 'demo' }) : undefined;
  const dataDir = demoDataDir(options);
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: modelName, source, aliases: [], poolLimit: DEFAULT_POOL_LIMIT }],
    // The runtime's own training loop, configured for the demo; started only once the "before" eval is done.
    training: { config: demoTrainingConfig(options), autoStart: false },
    ...(swarmToken ? { p2p: { swarmToken, listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false } } : {}),
  });
  let runner: DemoRunner | undefined;
  try {
    const model = runtime.serving.models.find(modelName);
    if (!model || model.state === 'failed') throw new DemoError(`the model ${options.model} did not load: ${model?.error ?? 'unknown'}`);
    const backend = model.status().backend ?? 'unknown';
    runner = swarmToken
      ? await clientPeerProcess({ dataDir: join(outDir, 'client'), swarmToken, bootstrap: runtime.p2p!.node.multiaddrs()[0], model: modelName })
      : inProcessRunner(runtime.runner);
    onProgress({ phase: 'start', model: options.model, backend, uiUrl: runtime.urls.ui, agentsRun: runner.where, dataDir });
    const policyVersionBefore = model.policyVersion;
    const weightsBefore = await model.engine.getWeights();

    const attachBase: AttachBase = { script: { path: resolve(options.script) }, model: modelName, ...(options.reward ? { rewardModule: resolve(options.reward) } : {}) };
    const evaluate = async (label: 'before' | 'after'): Promise<EvalResult> => {
      const t0 = performance.now();
      const name = `eval-${label}`;
      const finished = async () => (await runner!.runs(name, files.evalCount * 4)).filter((r) => r.kind === 'eval' && r.status !== 'running');
      await runner!.attach({
        ...attachBase,
        name,
        tasks: { path: files.eval },
        epochs: 1,
        retries: 0,
        concurrency: options.evalConcurrency,
        sampling: { temperature: options.evalTemperature },
      });
      let reported = -1;
      await settled(runner!, name, async () => {
        const done = await finished();
        if (done.length === reported) return;
        reported = done.length;
        onProgress({ phase: 'eval', label, done: done.length, total: files.evalCount, successRate: successShare(done) });
      });
      const runs = await finished();
      await runner!.detach(name, false);
      return {
        episodes: runs.length,
        successRate: successShare(runs),
        meanReward: runs.length ? runs.reduce((a, r) => a + (r.reward ?? 0), 0) / runs.length : 0,
        aborted: runs.filter((r) => r.status === 'aborted').length,
        wallS: (performance.now() - t0) / 1000,
      };
    };

    const evalBefore = await evaluate('before');
    const { records, episodes } = await train(runtime, runner, model, files, options, attachBase, onProgress);
    const weightsChanged = differ(weightsBefore, await model.engine.getWeights());
    const evalAfter = await evaluate('after');

    const merged = records.reduce((a, r) => a + r.metrics.tokens, 0);
    const naive = records.reduce((a, r) => a + r.metrics.tokens * r.mergeTokenRatio, 0);
    const result: DemoResult = {
      steps: records.length,
      wall_s: Math.round((performance.now() - started) / 100) / 10,
      episodes: episodes + evalBefore.episodes + evalAfter.episodes,
      eval_before: evalBefore.successRate,
      eval_after: evalAfter.successRate,
      merge_token_ratio: merged > 0 ? Math.round((naive / merged) * 1000) / 1000 : 1,
      backend,
      model: options.model,
      policyVersionBefore,
      policyVersionAfter: model.policyVersion,
      weightsChanged,
      agentsRun: runner.where,
      evalBefore,
      evalAfter,
      stepRecords: records,
      options,
      outDir,
      dataDir,
      modelName,
      runId: latestRunOfModel(runtime.db, modelName)?.id ?? null,
    };
    onProgress({ phase: 'done', result });
    return result;
  } finally {
    await runner?.close();
    await runtime.stop();
  }
}

/** What every attachment of the demo shares: the agent script, the model and the grader. */
type AttachBase = Pick<AttachClientRequest, 'script' | 'model' | 'rewardModule'>;

function differ(a: NamedTensors, b: NamedTensors): boolean {
  return Object.entries(a).some(([name, t]) => {
    const other = b[name]?.data;
    return !other || other.length !== t.data.length || t.data.some((v, i) => v !== other[i]);
  });
}

function successShare(runs: ClientRunRecord[]): number {
  return runs.length ? runs.filter((r) => r.status === 'ended' && (r.reward ?? 0) >= 1).length / runs.length : 0;
}

/** Training settings of a demo run (a fresh run folder, so the step counter starts at 0). */
function demoTrainingConfig(options: DemoOptions): TrainingConfigOverrides {
  return {
    batchTasks: options.batchTasks,
    groupSize: options.groupSize,
    maxSteps: options.steps,
    checkpointEvery: 0,
    staleness: options.staleness ?? 0,
    train: { learningRate: options.learningRate, klCoef: options.klCoef, ...(options.loss ? { loss: options.loss } : {}) },
  };
}

/** Attaches the train tasks and runs the runtime's training loop until it has done `options.steps` steps. */
async function train(
  runtime: PeerRuntime,
  runner: DemoRunner,
  model: HostedModel,
  files: TaskFiles,
  options: DemoOptions,
  attachBase: AttachBase,
  onProgress: (p: DemoProgress) => void,
): Promise<{ records: StepRecord[]; episodes: number }> {
  const store = sqliteTrainingStore(runtime.db);
  const loop = runtime.training.loop(model.name);

  // Episodes finished since the last step: their rewards and merge savings go into that step's record.
  const emptyWindow = () => ({ episodes: 0, successes: 0, naive: 0, merged: 0, generated: 0, calls: 0 });
  let window = emptyWindow();
  let episodes = 0;
  const unsubscribe = model.onEpisodeDone((done) => {
    if (done.kind !== 'train' || done.outcome !== 'ended') return;
    episodes++;
    // What the episode stored when it ended (merged once, in the mode training uses): nothing is merged again here.
    const stored = store.episodeTimelines(done.episodeId);
    if (!stored) return;
    window.episodes++;
    window.calls += store.episodeCalls(done.episodeId).length;
    if (stored.success) window.successes++;
    window.naive += stored.naiveTokens;
    window.merged += stored.timelines.reduce((n, t) => n + t.tokens.length, 0);
    window.generated += stored.timelines.reduce((n, t) => n + t.lossMask.reduce((a, m) => a + m, 0), 0);
  });

  const records: StepRecord[] = [];
  const t0 = performance.now();
  let lastStepAt = t0;
  const firstStep = model.step;
  await loop.start();
  await runner.attach({
    ...attachBase,
    name: 'train',
    tasks: { path: files.tasks },
    repeat: options.groupSize,
    concurrency: options.batchTasks * options.groupSize,
    retries: 0,
    maxConsecutiveFailures: 1000,
  });
  onProgress({ phase: 'train-start', total: options.steps });
  try {
    let after = firstStep;
    while (records.length < options.steps) {
      await new Promise((r) => setTimeout(r, 250));
      if (performance.now() - lastStepAt > options.stallTimeoutS * 1000) {
        throw new DemoError(`no training step in ${options.stallTimeoutS} s: groups need different rewards to learn from (is the model able to solve any task?)`);
      }
      const state = loop.state();
      if (state.status === 'failed') throw new DemoError(`training failed: ${state.lastError}`);
      const client = await runner.status('train');
      if (client.state === 'broken') throw new DemoError(`the agent script keeps failing: ${client.reason}`);
      for (const step of store.listSteps(model.name, { afterStep: after, limit: 100 })) {
        after = step.step;
        const now = performance.now();
        const record: StepRecord = {
          ...step,
          wallS: (now - t0) / 1000,
          rolloutSuccessRate: window.episodes ? window.successes / window.episodes : 0,
          trainerTokensPerS: step.metrics.tokens / Math.max(1e-3, step.metrics.timeMs / 1000),
          endToEndTokensPerS: (step.metrics.tokens + window.generated) / Math.max(1e-3, (now - lastStepAt) / 1000),
          mergeTokenRatio: window.merged > 0 ? window.naive / window.merged : 1,
          callsPerEpisode: window.episodes ? window.calls / window.episodes : 0,
        };
        lastStepAt = now;
        window = emptyWindow();
        records.push(record);
        onProgress({ phase: 'train', step: records.length, total: options.steps, record });
      }
    }
  } finally {
    unsubscribe();
    await runner.detach('train', true);
    await loop.stop();
  }
  return { records, episodes };
}
