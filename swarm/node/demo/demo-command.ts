/**
 * `agentjet demo`: trains the builtin model on the calculator agent end to end on this machine and writes a run
 * folder with a report. `--json` prints the summary as the last line of stdout; progress goes to stderr.
 */
import { join, resolve } from 'node:path';
import { parsePositiveInt, UsageError, type Command } from '../cli/command.ts';
import { formatDuration, ProgressBar } from '../cli/progress.ts';
import { DEFAULT_DEMO, runDemo, type DemoOptions, type DemoProgress, type DemoResult } from './demo.ts';
import { writeDemoReport } from './report.ts';

const USAGE = `agentjet demo [--steps N] [--json] [--out DIR] [--model builtin:tiny|HF_FOLDER]
                 [--script FILE --tasks FILE.jsonl [--reward FILE]] [--lr X] [--group-size N] [--batch-tasks N]

Starts a peer with the model, attaches the calculator agent (examples/calculator) with its tasks, evaluates on
${DEFAULT_DEMO.evalTasks} held-out tasks, trains --steps steps (default ${DEFAULT_DEMO.steps}) through the real training loop, evaluates again,
and writes runs/<time>/report.md with SVG plots and summary.json.

  --script, --tasks, --reward   your own agent script, task file (held-out tasks carry "split": "eval") and grader
  --model                       a Hugging Face model folder instead of the builtin one
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
  };
}

/** Progress bars on stderr: one per eval, one for training (step, reward, success, tokens/s, merge ratio, ETA). */
function progressPrinter(): (p: DemoProgress) => void {
  let bar: ProgressBar | null = null;
  let current = '';
  return (p) => {
    if (p.phase === 'start') {
      process.stderr.write(`agentjet demo: ${p.model} on ${p.backend}\n`);
    } else if (p.phase === 'eval') {
      if (current !== `eval-${p.label}`) {
        current = `eval-${p.label}`;
        bar = new ProgressBar({ total: p.total, label: `eval ${p.label.padEnd(6)}` });
      }
      bar!.update(p.done, { success: p.successRate.toFixed(2) });
      if (p.done === p.total) bar!.done({ success: p.successRate.toFixed(2) });
    } else if (p.phase === 'train') {
      if (current !== 'train') {
        current = 'train';
        bar = new ProgressBar({ total: p.total, label: 'train      ' });
      }
      const r = p.record;
      const fields = { reward: r.rewardMean.toFixed(2), success: r.successRate.toFixed(2), 'tok/s': Math.round(r.endToEndTokensPerS), merge: `${r.mergeTokenRatio.toFixed(2)}x` };
      if (p.step === p.total) bar!.done(fields);
      else bar!.update(p.step, fields);
    }
  };
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
  },
  async run(values) {
    const options = demoOptionsFrom(values);
    const result = await runDemo(options, progressPrinter());
    const report = writeDemoReport(result);
    const gain = (result.eval_after - result.eval_before) * 100;
    process.stderr.write(
      `held-out success ${(result.eval_before * 100).toFixed(1)}% → ${(result.eval_after * 100).toFixed(1)}% (${gain >= 0 ? '+' : ''}${gain.toFixed(1)} pp) ` +
        `in ${formatDuration(result.wall_s)}; report: ${report}\n`,
    );
    if (values.json) process.stdout.write(summaryLine(result) + '\n');
    return 0;
  },
};
