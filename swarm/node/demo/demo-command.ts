/**
 * `agentjet demo`: trains a builtin model on a scenario's agents (the calculator by default) end to end on this
 * machine and writes a run folder with a report. `--scenario all` runs every scenario, one run folder each.
 * `--json` prints the summary as the last line of stdout; progress goes to stderr.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parsePositiveInt, UsageError, type Command } from '../cli/command.ts';
import { formatDuration, ProgressBar } from '../cli/progress.ts';
import { DEFAULT_DEMO, demoDataDir, DemoError, demoPlan, runDemo, type DemoOptions, type DemoProgress, type DemoResult } from './demo.ts';
import { writeDemoReport } from './report.ts';
import { parseScenario, SCENARIO_NAMES, scenarioModelSources, ScenarioError, type ScenarioName, scenarioDefaults } from './scenarios.ts';

const USAGE = `agentjet demo [--scenario NAME|all] [--steps N] [--json] [--out DIR] [--model builtin:NAME|HF_FOLDER]
                 [--script FILE [--tasks FILE.jsonl] [--reward FILE] [--bundle]] [--lr X] [--group-size N] [--batch-tasks N]
                 [--eval-tasks N] [--eval-temperature T] [--two-process] [--no-ui]

Starts a peer with the scenario's model, attaches its agents with their tasks, evaluates on ${DEFAULT_DEMO.evalTasks} held-out
tasks per task, trains --steps steps (default ${DEFAULT_DEMO.steps}) through the real training loop, evaluates again, and writes
runs/<time>/report.md with SVG plots and summary.json.

  --scenario                    ${SCENARIO_NAMES.map((n) => `${n} (${scenarioModelSources(n).join(', ')})`).join(', ')}; all: each in turn,
                                one run folder each under --out. calculator: one agent with a tool; multi-turn:
                                guess the number, an environment that answers every move (a Python agent);
                                cocktail: both at once on one model, each task in its own runtime; team: a proposer
                                and a verifier, two models, each trained on its own role's reward
  --script, --tasks, --reward   your own agent script, task file (held-out tasks carry "split": "eval") and grader;
                                without --tasks the script plays the scenario's tasks
  --bundle                      bundle a Node --script with its packages at attach (faster episode starts; the
                                scenarios' own agents always are)
  --model                       a Hugging Face model folder instead of the builtin one
  --two-process                 run the agents in a second peer process (a swarm client on this machine) that
                                reaches the model over a private loopback swarm; this process hosts and trains it
  --eval-temperature            eval sampling temperature (default ${DEFAULT_DEMO.evalTemperature}: the policy as trained; 0: greedy)
  --no-ui                       do not build the UI when it is missing (the live UI's URL is printed at the start)
  --json                        print {"scenario","steps","wall_s","episodes","eval_before","eval_after","merge_token_ratio","backend","tasks"} last
                                (tasks: each task's held-out success, a team's roles and the script's metrics, before and after)
                                (with --scenario all: {"scenarios": [...]})`;

function positiveNumber(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${flag} must be a number ≥ 0, got "${value}"`);
  return n;
}

/** The scenarios `--scenario` names: one, or all of them in turn. */
export function scenariosFrom(values: Record<string, unknown>): ScenarioName[] {
  const text = values.scenario as string | undefined;
  if (text === 'all') {
    if (values.script) throw new UsageError('--script replaces one scenario\'s agent; give --scenario NAME, not all');
    return [...SCENARIO_NAMES];
  }
  try {
    return [text === undefined ? DEFAULT_DEMO.scenario : parseScenario(text)];
  } catch (err) {
    if (err instanceof ScenarioError) throw new UsageError(err.message);
    throw err;
  }
}

export function demoOptionsFrom(values: Record<string, unknown>, now = new Date(), scenario: ScenarioName = scenariosFrom(values)[0]): DemoOptions {
  const str = (k: string) => values[k] as string | undefined;
  const stamp = now.toISOString().replace(/[:.]/g, '-').slice(0, 19);
  const several = values.scenario === 'all';
  const defaults = { ...DEFAULT_DEMO, ...scenarioDefaults(scenario) };
  const options: DemoOptions = {
    ...defaults,
    scenario,
    steps: parsePositiveInt('--steps', str('steps'), defaults.steps),
    ...(str('model') ? { model: str('model') } : {}),
    out: resolve(str('out') ?? join('runs', stamp), several ? scenario : '.'),
    ...(str('script') ? { script: str('script') } : {}),
    tasks: str('tasks'),
    reward: str('reward'),
    ...(values.bundle === true ? { bundle: true } : {}),
    learningRate: positiveNumber('--lr', str('lr'), defaults.learningRate),
    groupSize: parsePositiveInt('--group-size', str('group-size'), defaults.groupSize),
    batchTasks: parsePositiveInt('--batch-tasks', str('batch-tasks'), defaults.batchTasks),
    evalTasks: parsePositiveInt('--eval-tasks', str('eval-tasks'), DEFAULT_DEMO.evalTasks),
    evalTemperature: positiveNumber('--eval-temperature', str('eval-temperature'), DEFAULT_DEMO.evalTemperature),
    twoProcess: values['two-process'] === true,
  };
  // What the run would attach, planned now (no I/O): a flag combination it cannot run is a usage error, not a failed run.
  try {
    demoPlan(options);
  } catch (err) {
    if (err instanceof DemoError) throw new UsageError(err.message);
    throw err;
  }
  return options;
}

/** Progress bars on stderr: one per eval, one for training (step, reward, success, tokens/s, merge ratio, ETA). */
function progressPrinter(): (p: DemoProgress) => void {
  let bar: ProgressBar | null = null;
  let current = '';
  return (p) => {
    if (p.phase === 'start') {
      process.stderr.write(`agentjet demo: scenario ${p.scenario} (${p.tasks.join(' + ')}): ${p.model} on ${p.backend}; agents run ${p.agentsRun}\n  live UI: ${p.uiUrl}\n`);
    } else if (p.phase === 'eval') {
      if (current !== `eval-${p.label}`) {
        current = `eval-${p.label}`;
        bar = new ProgressBar({ total: p.total, label: `eval ${p.label.padEnd(6)}` });
      }
      const byTask = Object.keys(p.byTask).length > 1 ? Object.fromEntries(Object.entries(p.byTask).map(([task, rate]) => [task, rate.toFixed(2)])) : {};
      const fields = { success: p.successRate.toFixed(2), ...byTask };
      if (p.done === p.total) bar!.done(fields);
      else bar!.update(p.done, fields);
    } else if (p.phase === 'train-start') {
      // Drawn now, so that elapsed time and ETA count the first step's rollouts too.
      current = 'train';
      bar = new ProgressBar({ total: p.total, label: 'train      ' });
      bar.update(0, {});
    } else if (p.phase === 'train') {
      const r = p.record;
      const byTask = Object.keys(r.rolloutByTask).length > 1 ? Object.fromEntries(Object.entries(r.rolloutByTask).map(([task, t]) => [task, t.successRate.toFixed(2)])) : {};
      const fields = {
        reward: r.rewardMean.toFixed(2),
        success: r.rolloutSuccessRate.toFixed(2),
        ...byTask,
        // Groups whose repeats all scored the same teach nothing and are left out: their share since the last step.
        discarded: r.discardedShare === undefined ? '-' : r.discardedShare.toFixed(2),
        'tok/s': Math.round(r.endToEndTokensPerS),
        calls: r.callsPerEpisode.toFixed(2),
        merge: `${r.mergeTokenRatio.toFixed(2)}x`,
      };
      if (p.step === p.total) bar!.done(fields);
      else bar!.update(p.step, fields);
    }
  };
}

/**
 * The demo's live UI needs the built renderer; a fresh clone has none, so it is built once here (about half a
 * minute) rather than showing a "not built" page. A failed build is reported and the demo goes on without it.
 */
function ensureUiBuilt(): void {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  if (existsSync(join(root, 'renderer/dist/index.html'))) return;
  process.stderr.write('agentjet demo: building the UI once (npm run build:ui) …\n');
  const vite = join(root, 'node_modules/vite/bin/vite.js');
  const built = spawnSync(process.execPath, [vite, 'build', '--config', 'renderer/vite.config.ts', '--logLevel', 'error'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  if (built.status !== 0) process.stderr.write('agentjet demo: the UI did not build; the run goes on, the report is written as usual\n');
}

/** A path as one shell word: quoted when it holds anything a shell would split or expand. */
export function shellWord(text: string): string {
  return /^[A-Za-z0-9_./:@%+=-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The commands that open the finished run: the UI on its data dir, the run's details, its report. */
export function lookAtRunLines(result: Pick<DemoResult, 'dataDir' | 'runId'>): string[] {
  const dir = shellWord(result.dataDir);
  const lines = [`  browse it in the UI:  agentjet node --data-dir ${dir}`];
  if (result.runId) {
    const run = shellWord(result.runId);
    lines.push(`  the run's details:    agentjet runs show ${run} --data-dir ${dir}`, `  its report again:     agentjet runs report ${run} --data-dir ${dir}`);
  }
  return lines;
}

/** The `--json` summary of one run: the demo's figures, and each task's held-out success before and after. */
export function demoSummary(result: DemoResult) {
  const { scenario, steps, wall_s, episodes, eval_before, eval_after, merge_token_ratio, backend, model } = result;
  const tasks = Object.fromEntries(
    result.tasks.map((t) => [
      t.name,
      {
        eval_before: t.evalBefore.successRate,
        eval_after: t.evalAfter.successRate,
        episodes: t.evalAfter.episodes,
        trained_episodes: t.trainedEpisodes,
        ...(t.roles ? { roles: t.roles } : {}),
        metrics: Object.fromEntries(Object.entries(t.metrics).map(([name, m]) => [name, { before: m.before, after: m.after }])),
      },
    ]),
  );
  return { scenario, model, steps, wall_s, episodes, eval_before, eval_after, merge_token_ratio, backend, tasks };
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'train a builtin model on a scenario (calculator, multi-turn, cocktail) end to end and write a report',
  usage: USAGE,
  options: {
    scenario: { type: 'string' },
    steps: { type: 'string' },
    json: { type: 'boolean' },
    out: { type: 'string' },
    model: { type: 'string' },
    script: { type: 'string' },
    tasks: { type: 'string' },
    reward: { type: 'string' },
    bundle: { type: 'boolean' },
    lr: { type: 'string' },
    'group-size': { type: 'string' },
    'batch-tasks': { type: 'string' },
    'eval-tasks': { type: 'string' },
    'eval-temperature': { type: 'string' },
    'no-ui': { type: 'boolean' },
    'two-process': { type: 'boolean' },
  },
  async run(values) {
    const scenarios = scenariosFrom(values);
    const now = new Date();
    const runs = scenarios.map((scenario) => demoOptionsFrom(values, now, scenario));
    if (!values['no-ui']) ensureUiBuilt();
    const summaries = [];
    for (const options of runs) {
      process.stderr.write(`agentjet demo: run folder ${options.out}\n  data dir: ${demoDataDir(options)}\n`);
      const result = await runDemo(options, progressPrinter());
      const report = writeDemoReport(result);
      const gain = (result.eval_after - result.eval_before) * 100;
      process.stderr.write(
        `held-out success ${(result.eval_before * 100).toFixed(1)}% → ${(result.eval_after * 100).toFixed(1)}% (${gain >= 0 ? '+' : ''}${gain.toFixed(1)} pp) ` +
          `in ${formatDuration(result.wall_s)}; report: ${report}\n`,
      );
      if (result.tasks.length > 1) {
        for (const t of result.tasks) process.stderr.write(`  ${t.name}: ${(t.evalBefore.successRate * 100).toFixed(1)}% → ${(t.evalAfter.successRate * 100).toFixed(1)}%\n`);
      }
      for (const t of result.tasks) {
        for (const [role, r] of Object.entries(t.roles ?? {})) process.stderr.write(`  ${role} (${r.model}) reward: ${r.before.toFixed(3)} → ${r.after.toFixed(3)}\n`);
      }
      process.stderr.write(`To look at the run${result.runId ? ` ${result.runId}` : ''}:\n${lookAtRunLines(result).join('\n')}\n`);
      summaries.push(demoSummary(result));
    }
    if (values.json) process.stdout.write(JSON.stringify(summaries.length === 1 ? summaries[0] : { scenarios: summaries }) + '\n');
    return 0;
  },
};
