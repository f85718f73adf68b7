/**
 * The full demo as a benchmark: `npm run bench -- demo [--json] [--steps N]`. Runs exactly what `agentjet demo`
 * runs (eval on the held-out tasks, training, eval again) and reports the demo's summary fields.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_DEMO, runDemo } from '../swarm/node/demo/demo.ts';
import { writeDemoReport } from '../swarm/node/demo/report.ts';
import { type BenchContext, formatTable } from './report.ts';

export default async function demoBench(ctx: BenchContext) {
  const stepsArg = ctx.args.indexOf('--steps');
  const steps = stepsArg >= 0 ? Number(ctx.args[stepsArg + 1]) : DEFAULT_DEMO.steps;
  const out = mkdtempSync(join(tmpdir(), 'agentjet-bench-demo-'));
  const result = await runDemo({ ...DEFAULT_DEMO, steps, out }, (p) => {
    if (p.phase === 'train') ctx.log(`step ${p.step}/${p.total} reward ${p.record.rewardMean.toFixed(3)} (${p.record.wallS.toFixed(0)} s)`);
    if (p.phase === 'eval' && p.done === p.total) ctx.log(`eval ${p.label}: success ${p.successRate.toFixed(3)}`);
  });
  const report = writeDemoReport(result);
  const summary = {
    steps: result.steps,
    wall_s: result.wall_s,
    episodes: result.episodes,
    eval_before: result.eval_before,
    eval_after: result.eval_after,
    merge_token_ratio: result.merge_token_ratio,
    backend: result.backend,
  };
  console.log(formatTable([{ ...summary, gain_pp: Math.round((result.eval_after - result.eval_before) * 1000) / 10 }]));
  ctx.log(`report: ${report}`);
  return summary;
}
