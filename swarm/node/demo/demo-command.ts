/**
 * `agentjet demo`: trains the builtin model on the calculator agent end to end on this machine and writes a run
 * folder with a report. `--json` prints the summary as the last line of stdout; progress goes to stderr.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parsePositiveInt, UsageError, type Command } from '../cli/command.ts';
import { formatDuration, ProgressBar } from '../cli/progress.ts';
import { DEFAULT_DEMO, demoDataDir, runDemo, type DemoOptions, type DemoProgress, type DemoResult } from './demo.ts';
import { writeDemoReport } from './report.ts';

const USAGE = `agentjet demo [--steps N] [--json] [--out DIR] [--model builtin:tiny|HF_FOLDER]
                 [--script FILE --tasks FILE.jsonl [--reward FILE]] [--lr X] [--group-size N] [--batch-tasks N]
                 [--eval-tasks N] [--eval-temperature T] [--two-process] [--no-ui]

Starts a peer with the model, attaches the calculator agent (examples/calculator) with its tasks, evaluates on
${DEFAULT_DEMO.evalTasks} held-out tasks, trains --steps steps (default ${DEFAULT_DEMO.steps}) through the real training loop, evaluates again,
and writes runs/<time>/report.md with SVG plots and summary.json.

  --script, --tasks, --reward   your own agent script, task file (held-out tasks carry "split": "eval") and grader
  --model                       a Hugging Face model folder instead of the builtin one
  --two-process                 run the agents in a second peer process (a swarm client on this machine) that
                                reaches the model over a private loopback swarm; this process hosts and trains it
  --eval-temperature            eval sampling temperature (default ${DEFAULT_DEMO.evalTemperature}: the policy as trained; 0: greedy)
  --no-ui                       do not build the UI when it is missing (the live UI's URL is printed at the start)
  --json                        print {"steps","wall_s","episodes","eval_before","eval_after","merge_token_ratio","backend"} last`;

function positiveNumber(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${flag} must be a number ≥ 0, got "${value}"`);
  return n;
}

export function demoOptionsFrom(values: Record<string, unknown>, now = new Date()): DemoOptions {
  const str = (k: string) => values[k] as string | undefined;
  if (str('tasks') && !str('script')) throw new UsageError('--tasks needs --script (the agent that solves those tasks)');
  const stamp = now.toISOString().replace(/[:.]/g, '-').slice(0, 19);
  return {
    ...DEFAULT_DEMO,
    steps: parsePositiveInt('--steps', str('steps'), DEFAULT_DEMO.steps),
    model: str('model') ?? DEFAULT_DEMO.model,
    out: resolve(str('out') ?? join('runs', stamp)),
    script: str('script') ?? DEFAULT_DEMO.script,
    tasks: str('tasks'),
    reward: str('reward') ?? (str('script') ? undefined : DEFAULT_DEMO.reward),
    learningRate: positiveNumber('--lr', str('lr'), DEFAULT_DEMO.learningRate),
    groupSize: parsePositiveInt('--group-size', str('group-size'), DEFAULT_DEMO.groupSize),
    batchTasks: parsePositiveInt('--batch-tasks', str('batch-tasks'), DEFAULT_DEMO.batchTasks),
    evalTasks: parsePositiveInt('--eval-tasks', str('eval-tasks'), DEFAULT_DEMO.evalTasks),
    evalTemperature: positiveNumber('--eval-temperature', str('eval-temperature'), DEFAULT_DEMO.evalTemperature),
    twoProcess: values['two-process'] === true,
  };
}

/** Progress bars on stderr: one per eval, one for training (step, reward, success, tokens/s, merge ratio, ETA). */
function progressPrinter(): (p: DemoProgress) => void {
  let bar: ProgressBar | null = null;
  let current = '';
  return (p) => {
    if (p.phase === 'start') {
      process.stderr.write(`agentjet demo: ${p.model} on ${p.backend}; agents run ${p.agentsRun}\n  live UI: ${p.uiUrl}\n`);
    } else if (p.phase === 'eval') {
      if (current !== `eval-${p.label}`) {
        current = `eval-${p.label}`;
        bar = new ProgressBar({ total: p.total, label: `eval ${p.label.padEnd(6)}` });
      }
      bar!.update(p.done, { success: p.successRate.toFixed(2) });
      if (p.done === p.total) bar!.done({ success: p.successRate.toFixed(2) });
    } else if (p.phase === 'train-start') {
      // Drawn now, so that elapsed time and ETA count the first step's rollouts too.
      current = 'train';
      bar = new ProgressBar({ total: p.total, label: 'train      ' });
      bar.update(0, {});
    } else if (p.phase === 'train') {
      const r = p.record;
      const fields = { reward: r.rewardMean.toFixed(2), success: r.rolloutSuccessRate.toFixed(2), 'tok/s': Math.round(r.endToEndTokensPerS), calls: r.callsPerEpisode.toFixed(2), merge: `${r.mergeTokenRatio.toFixed(2)}x` };
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

function summaryLine(result: DemoResult): string {
  const { steps, wall_s, episodes, eval_before, eval_after, merge_token_ratio, backend } = result;
  return JSON.stringify({ steps, wall_s, episodes, eval_before, eval_after, merge_token_ratio, backend });
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'train the builtin model on the calculator agent end to end and write a report',
  usage: USAGE,
  options: {
    steps: { type: 'string' },
    json: { type: 'boolean' },
    out: { type: 'string' },
    model: { type: 'string' },
    script: { type: 'string' },
    tasks: { type: 'string' },
    reward: { type: 'string' },
    lr: { type: 'string' },
    'group-size': { type: 'string' },
    'batch-tasks': { type: 'string' },
    'eval-tasks': { type: 'string' },
    'eval-temperature': { type: 'string' },
    'no-ui': { type: 'boolean' },
    'two-process': { type: 'boolean' },
  },
  async run(values) {
    const options = demoOptionsFrom(values);
    if (!values['no-ui']) ensureUiBuilt();
    process.stderr.write(`agentjet demo: run folder ${options.out}\n  data dir: ${demoDataDir(options)}\n`);
    const result = await runDemo(options, progressPrinter());
    const report = writeDemoReport(result);
    const gain = (result.eval_after - result.eval_before) * 100;
    process.stderr.write(
      `held-out success ${(result.eval_before * 100).toFixed(1)}% → ${(result.eval_after * 100).toFixed(1)}% (${gain >= 0 ? '+' : ''}${gain.toFixed(1)} pp) ` +
        `in ${formatDuration(result.wall_s)}; report: ${report}\n`,
    );
    process.stderr.write(`To look at the run${result.runId ? ` ${result.runId}` : ''}:\n${lookAtRunLines(result).join('\n')}\n`);
    if (values.json) process.stdout.write(summaryLine(result) + '\n');
    return 0;
  },
};
