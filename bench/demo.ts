/**
 * The demo's scenarios as a benchmark: `npm run bench -- demo [--scenario NAME|all] [--steps N] [--json]`. Runs
 * exactly what `agentjet demo --scenario NAME` runs (eval on the held-out tasks, training, eval again) and reports
 * held-out success before and after, per task (a team's roles' own rewards beside it), with the wall time; the JSON
 * line also carries each task's script metrics (demoSummary).
 *
 * The cocktail is also compared with each of its tasks trained alone on the same model, settings and steps, on the
 * task's own share of the batch (`alone_share_after`, `vs_alone_share_pp`: as many of its episodes a step as it had
 * in the cocktail, so a gap there is interference, not budget), and with `--alone-whole` on the cocktail's whole
 * batch too (`alone_after`, `vs_alone_pp`).
 *
 * `--repeats N` runs everything N times on different task seeds (the demo's seed, then +1, +2, …): one run's
 * held-out success moves by several points from the sampling alone (100 tasks at temperature 1), so a comparison
 * of two runs wants the mean of several. A last table gives each task's mean and standard deviation over the
 * repeats; the JSON line carries every repeat and the means.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { demoSummary } from '../swarm/node/demo/demo-command.ts';
import { DEFAULT_DEMO, runDemo, type DemoOptions, type DemoResult } from '../swarm/node/demo/demo.ts';
import { writeDemoReport } from '../swarm/node/demo/report.ts';
import { parseScenario, SCENARIO_MODELS, SCENARIO_NAMES, scenarioDefaults, type ScenarioName } from '../swarm/node/demo/scenarios.ts';
import { type BenchContext, formatTable, type Row } from './report.ts';

/** The scenario each cocktail task is trained alone in (the same agent, tasks and model). */
const ALONE: Record<string, ScenarioName> = { calculator: 'calculator', guess: 'multi-turn' };

function flag(ctx: BenchContext, name: string): string | undefined {
  const i = ctx.args.indexOf(name);
  return i >= 0 ? ctx.args[i + 1] : undefined;
}

export default async function demoBench(ctx: BenchContext) {
  const which = flag(ctx, '--scenario') ?? 'calculator';
  const scenarios = which === 'all' ? [...SCENARIO_NAMES] : [parseScenario(which)];
  const steps = flag(ctx, '--steps');
  const evalTasks = flag(ctx, '--eval-tasks');
  const repeats = Number(flag(ctx, '--repeats') ?? 1);
  if (!Number.isInteger(repeats) || repeats < 1) throw new Error(`--repeats: a whole number of runs, at least 1 (got ${flag(ctx, '--repeats')})`);
  const aloneWhole = ctx.args.includes('--alone-whole');
  const run = async (options: DemoOptions): Promise<DemoResult> => {
    const result = await runDemo(options, (p) => {
      if (p.phase === 'train') ctx.log(`${options.scenario} step ${p.step}/${p.total} reward ${p.record.rewardMean.toFixed(3)} discarded ${(p.record.discardedShare ?? 0).toFixed(2)} (${p.record.wallS.toFixed(0)} s)`);
      if (p.phase === 'eval' && p.done === p.total) ctx.log(`${options.scenario} eval ${p.label}: success ${p.successRate.toFixed(3)} ${JSON.stringify(p.byTask)}`);
    });
    ctx.log(`${options.scenario} report: ${writeDemoReport(result)}`);
    return result;
  };
  const optionsOf = (scenario: ScenarioName, seed: number, model?: string): DemoOptions => ({
    ...DEFAULT_DEMO,
    ...scenarioDefaults(scenario),
    scenario,
    seed,
    ...(model ? { model } : {}),
    ...(steps ? { steps: Number(steps) } : {}),
    ...(evalTasks ? { evalTasks: Number(evalTasks) } : {}),
    out: mkdtempSync(join(tmpdir(), `agentjet-bench-demo-${scenario}-`)),
  });

  const rows: Row[] = [];
  const results = [];
  for (const scenario of scenarios) {
    const runs: Record<string, unknown>[] = [];
    for (let repeat = 0; repeat < repeats; repeat++) {
      const seed = DEFAULT_DEMO.seed + repeat;
      const result = await run(optionsOf(scenario, seed));
      const summary: Record<string, unknown> = { ...demoSummary(result), seed };
      const taskSummaries = summary.tasks as Record<string, Record<string, unknown>>;
      for (const task of result.tasks) {
        const row: Row = {
          scenario,
          ...(repeats > 1 ? { seed } : {}),
          task: task.name,
          held_out: task.evalAfter.episodes,
          before: task.evalBefore.successRate,
          after: task.evalAfter.successRate,
          gain_pp: percentPoints(task.evalAfter.successRate - task.evalBefore.successRate),
          steps: result.steps,
          wall_s: result.wall_s,
        };
        // A team's roles: each role's own reward on the held-out tasks.
        for (const [role, r] of Object.entries(task.roles ?? {})) {
          row[`${role}_before`] = r.before;
          row[`${role}_after`] = r.after;
        }
        if (scenario === 'cocktail') {
          // The same model, settings (the KL coefficient too), seed and steps, on this task alone: with the task's own
          // share of the batch (its weight's share of the batch's tasks: as many of its episodes as it had in the
          // cocktail), which tells interference from budget, and (--alone-whole) with the cocktail's whole batch.
          const weights = result.tasks.reduce((sum, t) => sum + t.weight, 0);
          const aloneOn = (batchTasks: number) =>
            run({ ...optionsOf(ALONE[task.name], seed, SCENARIO_MODELS.cocktail), steps: result.steps, batchTasks, groupSize: result.options.groupSize, learningRate: result.options.learningRate, klCoef: result.options.klCoef });
          const shareTasks = Math.max(1, Math.round((result.options.batchTasks * task.weight) / weights));
          const share = await aloneOn(shareTasks);
          row.share_batch_tasks = shareTasks;
          row.alone_share_after = share.eval_after;
          row.vs_alone_share_pp = percentPoints(task.evalAfter.successRate - share.eval_after);
          taskSummaries[task.name].alone_share = { batch_tasks: shareTasks, eval_before: share.eval_before, eval_after: share.eval_after, wall_s: share.wall_s };
          if (aloneWhole) {
            const alone = await aloneOn(result.options.batchTasks);
            row.alone_after = alone.eval_after;
            row.vs_alone_pp = percentPoints(task.evalAfter.successRate - alone.eval_after);
            taskSummaries[task.name].alone = { eval_before: alone.eval_before, eval_after: alone.eval_after, wall_s: alone.wall_s };
          }
        }
        rows.push(row);
      }
      runs.push(summary);
    }
    results.push(repeats === 1 ? runs[0] : { scenario, repeats: runs, mean: meansOver(rows.filter((r) => r.scenario === scenario)) });
  }
  console.log(formatTable(rows));
  if (repeats > 1) {
    console.log(`\nmean ± standard deviation over ${repeats} repeats:`);
    console.log(formatTable(results.flatMap((r) => Object.values((r as { mean: Record<string, Row> }).mean))));
  }
  return results.length === 1 ? results[0] : { scenarios: results };
}

const percentPoints = (share: number) => Math.round(share * 1000) / 10;

/** Numeric columns a repeat's row is summarised by, when present. */
const MEAN_COLUMNS = ['before', 'after', 'gain_pp', 'wall_s', 'alone_share_after', 'vs_alone_share_pp', 'alone_after', 'vs_alone_pp'];

/** Per task: the mean and (sample) standard deviation of each column over the repeats' rows. */
function meansOver(rows: Row[]): Record<string, Row> {
  const byTask = new Map<string, Row[]>();
  for (const row of rows) byTask.set(String(row.task), [...(byTask.get(String(row.task)) ?? []), row]);
  const out: Record<string, Row> = {};
  for (const [task, taskRows] of byTask) {
    const mean: Row = { scenario: taskRows[0].scenario, task, repeats: taskRows.length };
    for (const column of MEAN_COLUMNS) {
      const values = taskRows.map((r) => r[column]).filter((v): v is number => typeof v === 'number');
      if (values.length === 0) continue;
      const m = values.reduce((a, b) => a + b, 0) / values.length;
      const sd = values.length > 1 ? Math.sqrt(values.reduce((a, v) => a + (v - m) ** 2, 0) / (values.length - 1)) : 0;
      mean[column] = Math.round(m * 1000) / 1000;
      mean[`${column}_sd`] = Math.round(sd * 1000) / 1000;
    }
    out[task] = mean;
  }
  return out;
}
