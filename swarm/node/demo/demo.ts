/**
 * The demo: one peer with a model, a scenario's agents attached through the client runner (scenarios.ts: the
 * calculator by default; guess the number; both at once), and the real training loop in between.
 *
 *   eval before  every held-out task of every scenario task once (eval episodes: never trained on)
 *   train        train tasks in GRPO groups, shared by the tasks' weights, until the loop has done `steps` steps
 *   eval after   the same held-out tasks again, on the trained weights
 *
 * Everything goes through the product's own paths: the agent is a child process speaking OpenAI to the gateway,
 * rewards come from the example's grader, samples from the merged timelines in the store.
 */
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { NamedTensors, TrainLoss } from '../../../worker/common/engine.ts';
import type { AttachClientRequest, ClientRunRecord } from '../../common/runner-api.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import { DEFAULT_POOL_LIMIT, type HostedModel } from '../models/model-host.ts';
import { parseModelSource } from '../models/model-spec.ts';
import { createSwarmToken } from '../../../p2p/index.ts';
import { PeerRuntime } from '../runtime.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { listEpisodes } from '../store/episode-list.ts';
import { latestRunOfModel } from '../store/training-runs.ts';
import type { TrainingConfigOverrides } from '../training/config.ts';
import { sqliteTrainingStore } from '../training/sqlite-training-store.ts';
import type { TaskFiles } from './task-files.ts';
import { clientPeerProcess, type DemoRunner, inProcessRunner, settled } from './demo-runner.ts';
import { type DemoPlan, type DemoTask, scenarioPlan, type ScenarioName, scriptPlan, taskDir } from './scenarios.ts';

export class DemoError extends Error {
  override name = 'DemoError';
}

export interface DemoOptions {
  /** Optimizer steps to train. */
  steps: number;
  /** What is trained on what (scenarios.ts); default the calculator. */
  scenario: ScenarioName;
  /** `builtin:NAME` or a Hugging Face model folder instead of the scenario's own model. */
  model?: string;
  /** The run folder (report, plots, task files, the peer's data). */
  out: string;
  /**
   * An agent script of one's own, in place of a one-task scenario's agent: with `tasks` (JSONL; tasks with "split":
   * "eval" are held out) on those tasks, without on the scenario's; graded by `reward` when given.
   */
  script?: string;
  tasks?: string;
  reward?: string;
  /** Bundle `script` with its packages at attach (the attach option `bundle`); the scenarios' own agents always are. */
  bundle?: boolean;
  /** Held-out and train tasks generated per scenario task when no task file is given (per task). */
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
  /** Optimizer updates per step (training.train.miniBatches; default 1). */
  miniBatches?: number;
}

export const DEFAULT_DEMO: DemoOptions = {
  steps: 15,
  scenario: 'calculator',
  out: '',
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
   * Held-out episodes that reported success over all of them (aborted ones count as failures); an episode without a
   * success flag succeeds with reward ≥ 1 (the calculator's grader gives reward 1 exactly when it reports success).
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
  /** Per scenario task: its train episodes finished since the previous step and the share that succeeded. */
  rolloutByTask: Record<string, { episodes: number; successRate: number }>;
}

/** One scenario task's held-out success before and after training. */
export interface TaskResult {
  name: string;
  script: string;
  weight: number;
  evalBefore: EvalResult;
  evalAfter: EvalResult;
  /** A team's roles: each role's mean reward on the held-out tasks (its own metric), before and after. */
  roles?: Record<string, { model: string; before: number; after: number }>;
  /** The held-out mean of each metric the script reports (its result's `metrics`), before and after. */
  metrics: Record<string, MetricResult>;
  /**
   * Its train episodes the steps trained on (read from the store). The weights share the rollouts; a task whose
   * groups are more often uniform (left out) gets less of the batches than its weight (in a 1 : 2 cocktail the
   * calculator gets 25–30% of the trained episodes, not 33%).
   */
  trainedEpisodes: number;
}

/**
 * One script metric on the held-out tasks: its mean over the episodes that reported it (null when none did). A
 * script reports a metric only where it applies, so its mean can be a conditional rate (the team's verifier: accepted,
 * of the right proposals).
 */
export interface MetricResult {
  before: number | null;
  after: number | null;
  episodesBefore: number;
  episodesAfter: number;
}

/** One trained model of the run (a team trains several). */
export interface ModelResult {
  name: string;
  policyVersionBefore: number;
  policyVersionAfter: number;
  weightsChanged: boolean;
  runId: string | null;
  stepRecords: StepRecord[];
}

export interface DemoResult {
  scenario: ScenarioName | 'script';
  steps: number;
  wall_s: number;
  episodes: number;
  /** Held-out success before and after: the mean over the scenario's tasks (one task: its own). */
  eval_before: number;
  eval_after: number;
  merge_token_ratio: number;
  backend: string;
  /** The model's source; a team's: each role's model with its source (`proposer=builtin:tiny-team, …`). */
  model: string;
  policyVersionBefore: number;
  policyVersionAfter: number;
  /** Whether training changed the model's weights (compared tensor by tensor). */
  weightsChanged: boolean;
  /** Where the agents ran: this process, or the client peer process (--two-process). */
  agentsRun: string;
  /** All tasks' held-out episodes together. */
  evalBefore: EvalResult;
  evalAfter: EvalResult;
  /** Each task's own (the cocktail's tasks apart). */
  tasks: TaskResult[];
  /** The first model's steps (the one model, or a team's first role's). */
  stepRecords: StepRecord[];
  /** Every trained model, with its own steps. */
  models: ModelResult[];
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
  | { phase: 'start'; scenario: string; tasks: string[]; model: string; backend: string; uiUrl: string; agentsRun: string; dataDir: string }
  | { phase: 'eval'; label: 'before' | 'after'; done: number; total: number; successRate: number; byTask: Record<string, number> }
  | { phase: 'train-start'; total: number }
  | { phase: 'train'; step: number; total: number; record: StepRecord }
  | { phase: 'done'; result: DemoResult };

/** The peer's data dir of a demo run: inside its run folder, so the folder holds everything the run made. */
export function demoDataDir(options: Pick<DemoOptions, 'out'>): string {
  return join(resolve(options.out), 'peer');
}

/** The plan a demo's options name: a scenario, or one's own script on its tasks or on the scenario's. */
export function demoPlan(options: DemoOptions): DemoPlan {
  const counts = { evalTasks: options.evalTasks, trainTasks: options.trainTasks, seed: options.seed };
  const bundle = options.bundle === true;
  if (options.script && options.tasks) return scriptPlan({ script: resolve(options.script), tasks: options.tasks, model: options.model ?? 'builtin:tiny', bundle, ...(options.reward ? { reward: resolve(options.reward) } : {}) });
  if (options.tasks) throw new DemoError('a task file needs the agent script that solves its tasks (--script)');
  const plan = scenarioPlan(options.scenario, counts, options.model);
  if (!options.script) return plan;
  if (plan.tasks.length !== 1) throw new DemoError(`--script replaces the agent of a one-task scenario; "${options.scenario}" has ${plan.tasks.length} tasks`);
  const { reward: _scenarioGrader, ...task } = plan.tasks[0];
  return { ...plan, tasks: [{ ...task, script: resolve(options.script), bundle, ...(options.reward ? { reward: resolve(options.reward) } : {}) }] };
}

export async function runDemo(options: DemoOptions, onProgress: (p: DemoProgress) => void = () => {}): Promise<DemoResult> {
  const started = performance.now();
  const outDir = resolve(options.out);
  mkdirSync(outDir, { recursive: true });
  const plan = demoPlan(options);
  const files = new Map<DemoTask, TaskFiles>();
  for (const task of plan.tasks) files.set(task, await task.files(plan.tasks.length === 1 ? outDir : taskDir(outDir, task)));
  // A team's models each say where they start from: proposer=builtin:tiny-team, verifier=builtin:tiny-verifier.
  const modelLabel = plan.models.length === 1 ? plan.models[0].source : plan.models.map((m) => `${m.name}=${m.source}`).join(', ');

  // Two processes: a private swarm of two peers on this machine (loopback only, no mDNS).
  const swarmToken = options.twoProcess ? createSwarmToken({ name: 'demo' }) : undefined;
  const dataDir = demoDataDir(options);
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: plan.models.map((m) => ({ name: m.name, source: parseModelSource(m.source), aliases: [], poolLimit: DEFAULT_POOL_LIMIT })),
    // The runtime's own training loops, configured for the demo; started only once the "before" eval is done.
    training: { config: demoTrainingConfig(options), autoStart: false },
    ...(swarmToken ? { p2p: { swarmToken, listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false } } : {}),
  });
  let runner: DemoRunner | undefined;
  try {
    const models = plan.models.map(({ name, source }) => {
      const model = runtime.serving.models.find(name);
      if (!model || model.state === 'failed') throw new DemoError(`the model ${source} did not load: ${model?.error ?? 'unknown'}`);
      return model;
    });
    const backend = models[0].status().backend ?? 'unknown';
    runner = swarmToken
      ? await clientPeerProcess({ dataDir: join(outDir, 'client'), swarmToken, bootstrap: runtime.p2p!.node.multiaddrs()[0], models: plan.models.map((m) => m.name) })
      : inProcessRunner(runtime.runner);
    onProgress({ phase: 'start', scenario: scenarioLabel(options), tasks: plan.tasks.map((t) => t.name), model: modelLabel, backend, uiUrl: runtime.urls.ui, agentsRun: runner.where, dataDir });
    const before = await Promise.all(models.map(async (m) => ({ version: m.policyVersion, weights: await m.engine.getWeights() })));
    const succeeded = (run: ClientRunRecord) => runSucceeded(runtime, run);

    const evaluate = async (label: 'before' | 'after'): Promise<Map<DemoTask, { result: EvalResult; runs: ClientRunRecord[] }>> => {
      const t0 = performance.now();
      const name = (task: DemoTask) => `eval-${label}${plan.tasks.length > 1 ? `-${task.name}` : ''}`;
      const total = plan.tasks.reduce((n, t) => n + files.get(t)!.evalCount, 0);
      const finished = async (task: DemoTask) => (await runner!.runs(name(task), files.get(task)!.evalCount * 4)).filter((r) => r.kind === 'eval' && r.status !== 'running');
      for (const task of plan.tasks) {
        await runner!.attach({
          ...attachOf(task),
          name: name(task),
          tasks: { path: files.get(task)!.eval },
          epochs: 1,
          retries: 0,
          concurrency: Math.max(1, Math.round(options.evalConcurrency / plan.tasks.length)),
          sampling: { temperature: options.evalTemperature },
        });
      }
      let reported = -1;
      const report = async () => {
        const done = await Promise.all(plan.tasks.map(finished));
        const count = done.reduce((n, runs) => n + runs.length, 0);
        if (count === reported) return;
        reported = count;
        const byTask = Object.fromEntries(plan.tasks.map((t, i) => [t.name, share(done[i], succeeded)]));
        onProgress({ phase: 'eval', label, done: count, total, successRate: share(done.flat(), succeeded), byTask });
      };
      // The tasks run side by side; waiting for them one after the other keeps one poll reporting on all of them.
      for (const task of plan.tasks) await settled(runner!, name(task), report);
      const results = new Map<DemoTask, { result: EvalResult; runs: ClientRunRecord[] }>();
      for (const task of plan.tasks) {
        const runs = await finished(task);
        await runner!.detach(name(task), false);
        results.set(task, { result: evalResult(runs, succeeded, (performance.now() - t0) / 1000), runs });
      }
      return results;
    };

    const evalBefore = await evaluate('before');
    const { records, episodes } = await train(runtime, runner, models, plan, files, options, onProgress);
    const evalAfter = await evaluate('after');

    const modelResults: ModelResult[] = await Promise.all(
      models.map(async (m, i) => ({
        name: m.name,
        policyVersionBefore: before[i].version,
        policyVersionAfter: m.policyVersion,
        weightsChanged: differ(before[i].weights, await m.engine.getWeights()),
        runId: latestRunOfModel(runtime.db, m.name)?.id ?? null,
        stepRecords: records.get(m.name) ?? [],
      })),
    );
    const tasks: TaskResult[] = plan.tasks.map((task) => ({
      name: task.name,
      script: task.script,
      weight: task.weight,
      evalBefore: evalBefore.get(task)!.result,
      evalAfter: evalAfter.get(task)!.result,
      ...('team' in task.players ? { roles: roleResults(runtime, task.players.team, evalBefore.get(task)!.runs, evalAfter.get(task)!.runs) } : {}),
      metrics: metricResults(runtime, evalBefore.get(task)!.runs, evalAfter.get(task)!.runs),
      trainedEpisodes: listEpisodes(runtime.db, { client: trainClientName(plan, task), state: 'trained', limit: 1 }).total,
    }));
    const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
    const [primary] = modelResults;
    const merged = primary.stepRecords.reduce((a, r) => a + r.metrics.tokens, 0);
    const naive = primary.stepRecords.reduce((a, r) => a + r.metrics.tokens * r.mergeTokenRatio, 0);
    const result: DemoResult = {
      scenario: options.script ? 'script' : options.scenario,
      steps: primary.stepRecords.length,
      wall_s: Math.round((performance.now() - started) / 100) / 10,
      episodes: episodes + [...evalBefore.values(), ...evalAfter.values()].reduce((n, e) => n + e.result.episodes, 0),
      eval_before: mean(tasks.map((t) => t.evalBefore.successRate)),
      eval_after: mean(tasks.map((t) => t.evalAfter.successRate)),
      merge_token_ratio: merged > 0 ? Math.round((naive / merged) * 1000) / 1000 : 1,
      backend,
      model: modelLabel,
      policyVersionBefore: primary.policyVersionBefore,
      policyVersionAfter: primary.policyVersionAfter,
      weightsChanged: modelResults.every((m) => m.weightsChanged),
      agentsRun: runner.where,
      evalBefore: combined([...evalBefore.values()].map((e) => e.result)),
      evalAfter: combined([...evalAfter.values()].map((e) => e.result)),
      tasks,
      stepRecords: primary.stepRecords,
      models: modelResults,
      options,
      outDir,
      dataDir,
      modelName: primary.name,
      runId: primary.runId,
    };
    onProgress({ phase: 'done', result });
    return result;
  } finally {
    await runner?.close();
    await runtime.stop();
  }
}

/** A team's held-out episodes by role: each role's mean reward (its own metric), read from the store. */
function roleResults(runtime: PeerRuntime, team: Record<string, string>, before: ClientRunRecord[], after: ClientRunRecord[]): Record<string, { model: string; before: number; after: number }> {
  const meanOf = (runs: ClientRunRecord[], model: string) => {
    const rewards = runs.flatMap((run) => run.episodeIds.map((id) => getEpisode(runtime.db, id)).filter((e) => e?.model === model).map((e) => e!.reward ?? 0));
    return rewards.length ? rewards.reduce((a, r) => a + r, 0) / rewards.length : 0;
  };
  return Object.fromEntries(Object.entries(team).map(([role, model]) => [role, { model, before: meanOf(before, model), after: meanOf(after, model) }]));
}

/** The held-out means of the metrics the scripts reported, read from the store (a team's roles share one result). */
function metricResults(runtime: PeerRuntime, before: ClientRunRecord[], after: ClientRunRecord[]): Record<string, MetricResult> {
  const means = (runs: ClientRunRecord[]) => {
    const sums = new Map<string, { sum: number; episodes: number }>();
    for (const run of runs) {
      if (run.status !== 'ended' || run.episodeIds.length === 0) continue;
      for (const [name, value] of Object.entries(getEpisode(runtime.db, run.episodeIds[0])?.metrics ?? {})) {
        if (typeof value !== 'number' || !Number.isFinite(value)) continue;
        const entry = sums.get(name) ?? { sum: 0, episodes: 0 };
        entry.sum += value;
        entry.episodes += 1;
        sums.set(name, entry);
      }
    }
    return sums;
  };
  const b = means(before);
  const a = means(after);
  const names = [...new Set([...b.keys(), ...a.keys()])].sort();
  const mean = (entry: { sum: number; episodes: number } | undefined) => (entry ? entry.sum / entry.episodes : null);
  return Object.fromEntries(names.map((name) => [name, { before: mean(b.get(name)), after: mean(a.get(name)), episodesBefore: b.get(name)?.episodes ?? 0, episodesAfter: a.get(name)?.episodes ?? 0 }]));
}

function scenarioLabel(options: DemoOptions): string {
  return options.script ? `${options.script.split('/').pop()}${options.tasks ? '' : ` on the ${options.scenario} tasks`}` : options.scenario;
}

/** What every attachment of a task shares: its agent script, its model (or a team's models) and its grader. */
function attachOf(task: DemoTask): Pick<AttachClientRequest, 'script' | 'model' | 'models' | 'rewardModule' | 'bundle'> {
  const players = 'model' in task.players ? { model: task.players.model } : { models: task.players.team };
  return { script: { path: task.script }, ...players, ...(task.reward ? { rewardModule: task.reward } : {}), ...(task.bundle ? { bundle: true } : {}) };
}

function differ(a: NamedTensors, b: NamedTensors): boolean {
  return Object.entries(a).some(([name, t]) => {
    const other = b[name]?.data;
    return !other || other.length !== t.data.length || t.data.some((v, i) => v !== other[i]);
  });
}

/**
 * A run succeeded when it ended and its episode reported success (read from the store that recorded it); an
 * episode without a success flag, or one this peer did not record, succeeds with reward ≥ 1.
 */
function runSucceeded(runtime: PeerRuntime, run: ClientRunRecord): boolean {
  if (run.status !== 'ended') return false;
  // A team's episodes end together with the team's one success flag.
  const flag = run.episodeIds.length ? getEpisode(runtime.db, run.episodeIds[0])?.success : null;
  return flag ?? (run.reward ?? 0) >= 1;
}

function share(runs: ClientRunRecord[], succeeded: (run: ClientRunRecord) => boolean): number {
  return runs.length ? runs.filter(succeeded).length / runs.length : 0;
}

function evalResult(runs: ClientRunRecord[], succeeded: (run: ClientRunRecord) => boolean, wallS: number): EvalResult {
  return {
    episodes: runs.length,
    successRate: share(runs, succeeded),
    meanReward: runs.length ? runs.reduce((a, r) => a + (r.reward ?? 0), 0) / runs.length : 0,
    aborted: runs.filter((r) => r.status === 'aborted').length,
    wallS,
  };
}

/** Several tasks' evaluations as one: episode-weighted shares, the longest wall time (they ran side by side). */
function combined(results: EvalResult[]): EvalResult {
  const episodes = results.reduce((n, r) => n + r.episodes, 0);
  const weighted = (pick: (r: EvalResult) => number) => (episodes ? results.reduce((a, r) => a + pick(r) * r.episodes, 0) / episodes : 0);
  return { episodes, successRate: weighted((r) => r.successRate), meanReward: weighted((r) => r.meanReward), aborted: results.reduce((n, r) => n + r.aborted, 0), wallS: Math.max(...results.map((r) => r.wallS)) };
}

/** Training settings of a demo run (a fresh run folder, so the step counter starts at 0). */
function demoTrainingConfig(options: DemoOptions): TrainingConfigOverrides {
  return {
    batchTasks: options.batchTasks,
    groupSize: options.groupSize,
    maxSteps: options.steps,
    checkpointEvery: 0,
    staleness: options.staleness ?? 0,
    train: { learningRate: options.learningRate, klCoef: options.klCoef, ...(options.loss ? { loss: options.loss } : {}), ...(options.miniBatches ? { miniBatches: options.miniBatches } : {}) },
  };
}

/** The train attachment of a task: "train" alone, "train-NAME" beside others. */
function trainClientName(plan: DemoPlan, task: DemoTask): string {
  return plan.tasks.length > 1 ? `train-${task.name}` : 'train';
}

/**
 * Attaches every task's train tasks and runs the runtime's training loops until each model has done
 * `options.steps` steps. The runner's fair share starts the tasks' episodes in proportion to their weights; each
 * task may hold every slot of a batch's worth in flight (the runner's own limit caps them together), so that a task
 * whose episodes take longer is not held below its weight (with slots shared by weight, the calculator's longer
 * episodes got it ~24% of a 1 : 2 cocktail's starts instead of 33%, and 20% of the trained episodes). A team's
 * models train side by side, each on its own role's episodes.
 */
async function train(
  runtime: PeerRuntime,
  runner: DemoRunner,
  models: HostedModel[],
  plan: DemoPlan,
  files: Map<DemoTask, TaskFiles>,
  options: DemoOptions,
  onProgress: (p: DemoProgress) => void,
): Promise<{ records: Map<string, StepRecord[]>; episodes: number }> {
  const store = sqliteTrainingStore(runtime.db);
  const taskOfClient = new Map(plan.tasks.map((task) => [trainClientName(plan, task), task.name]));
  const records = new Map<string, StepRecord[]>(models.map((m) => [m.name, []]));
  const t0 = performance.now();
  let lastStepAt = t0;
  let episodes = 0;

  // Per model, the episodes finished since its last step: their rewards and merge savings go into that step's record.
  const emptyWindow = () => ({ episodes: 0, successes: 0, naive: 0, merged: 0, generated: 0, calls: 0, byTask: new Map<string, { episodes: number; successes: number }>(), since: performance.now() });
  const windows = new Map(models.map((m) => [m.name, emptyWindow()]));
  const unsubscribe = models.map((model) =>
    model.onEpisodeDone((done) => {
      if (done.kind !== 'train' || done.outcome !== 'ended') return;
      episodes++;
      // What the episode stored when it ended (merged once, in the mode training uses): nothing is merged again here.
      const stored = store.episodeTimelines(done.episodeId);
      if (!stored) return;
      const window = windows.get(model.name)!;
      window.episodes++;
      window.calls += store.episodeCalls(done.episodeId).length;
      if (stored.success) window.successes++;
      window.naive += stored.naiveTokens;
      window.merged += stored.timelines.reduce((n, t) => n + t.tokens.length, 0);
      window.generated += stored.timelines.reduce((n, t) => n + t.lossMask.reduce((a, m) => a + m, 0), 0);
      const task = taskOfClient.get(getEpisode(runtime.db, done.episodeId)?.client ?? '');
      if (task) {
        const counts = window.byTask.get(task) ?? { episodes: 0, successes: 0 };
        counts.episodes++;
        if (stored.success) counts.successes++;
        window.byTask.set(task, counts);
      }
    }),
  );

  const firstSteps = new Map(models.map((m) => [m.name, m.step]));
  // A batch's worth of episodes at once; asynchronous training admits up to η + 1 batches in flight and queued (the
  // loop's admission gate throttles the rest), so the runners offer that many and the gate, not they, sets the pace.
  const inFlight = options.batchTasks * options.groupSize * ((options.staleness ?? 0) + 1);
  const loops = models.map((m) => runtime.training.loop(m.name));
  for (const loop of loops) await loop.start();
  for (const task of plan.tasks) {
    await runner.attach({
      ...attachOf(task),
      name: trainClientName(plan, task),
      tasks: { path: files.get(task)!.tasks },
      repeat: options.groupSize,
      concurrency: inFlight,
      weight: task.weight,
      retries: 0,
      maxConsecutiveFailures: 1000,
    });
  }
  onProgress({ phase: 'train-start', total: options.steps });
  const done = () => [...records.values()].every((r) => r.length >= options.steps);
  try {
    while (!done()) {
      await new Promise((r) => setTimeout(r, 250));
      if (performance.now() - lastStepAt > options.stallTimeoutS * 1000) {
        throw new DemoError(`no training step in ${options.stallTimeoutS} s: groups need different rewards to learn from (is the model able to solve any task?)`);
      }
      for (const loop of loops) {
        const state = loop.state();
        if (state.status === 'failed') throw new DemoError(`training failed: ${state.lastError}`);
      }
      for (const task of plan.tasks) {
        const client = await runner.status(trainClientName(plan, task));
        if (client.state === 'broken') throw new DemoError(`the agent script of ${task.name} keeps failing: ${client.reason}`);
      }
      for (const [i, model] of models.entries()) {
        const mine = records.get(model.name)!;
        const fresh = store.listSteps(model.name, { afterStep: firstSteps.get(model.name)!, limit: 100 });
        if (fresh.length === 0) continue;
        firstSteps.set(model.name, fresh[fresh.length - 1].step);
        // Steps seen in one look share the episodes finished since the last: their shares, and the time since.
        const now = performance.now();
        const window = windows.get(model.name)!;
        windows.set(model.name, emptyWindow());
        lastStepAt = now;
        for (const step of fresh) {
          if (mine.length >= options.steps) break;
          const record: StepRecord = {
            ...step,
            wallS: (now - t0) / 1000,
            rolloutSuccessRate: window.episodes ? window.successes / window.episodes : 0,
            trainerTokensPerS: step.metrics.tokens / Math.max(1e-3, step.metrics.timeMs / 1000),
            endToEndTokensPerS: (step.metrics.tokens + window.generated / fresh.length) / Math.max(1e-3, (now - window.since) / 1000 / fresh.length),
            mergeTokenRatio: window.merged > 0 ? window.naive / window.merged : 1,
            callsPerEpisode: window.episodes ? window.calls / window.episodes : 0,
            rolloutByTask: Object.fromEntries([...window.byTask].map(([name, c]) => [name, { episodes: c.episodes, successRate: c.successes / c.episodes }])),
          };
          mine.push(record);
          // The bar follows the first model; a team's other roles step alongside it.
          if (i === 0) onProgress({ phase: 'train', step: mine.length, total: options.steps, record });
        }
      }
    }
  } finally {
    for (const off of unsubscribe) off();
    for (const task of plan.tasks) await runner.detach(trainClientName(plan, task), true);
    for (const loop of loops) await loop.stop();
  }
  return { records, episodes };
}
