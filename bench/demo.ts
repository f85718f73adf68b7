/**
 * The demo's scenarios as a benchmark: `npm run bench -- demo [--scenario NAME|all] [--steps N] [--json]`. Runs
 * exactly what `agentjet demo --scenario NAME` runs (eval on the held-out tasks, training, eval again) and reports
 * held-out success before and after, per task (a team's roles' own rewards beside it), with the wall time; the JSON
 * line also carries each task's script metrics (demoSummary).
 *
 * The cocktail is also compared with each of its tasks trained alone on the same model, settings and steps: with the
 * cocktail's whole batch (`alone_after`, `vs_alone_pp`), and with the task's own share of it (`alone_share_after`,
 * `vs_alone_share_pp`: as many of its episodes a step as it had in the cocktail, so a gap there is interference,
 * not budget).
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
  const run = async (options: DemoOptions): Promise<DemoResult> => {
    const result = await runDemo(options, (p) => {
      if (p.phase === 'train') ctx.log(`${options.scenario} step ${p.step}/${p.total} reward ${p.record.rewardMean.toFixed(3)} discarded ${(p.record.discardedShare ?? 0).toFixed(2)} (${p.record.wallS.toFixed(0)} s)`);
      if (p.phase === 'eval' && p.done === p.total) ctx.log(`${options.scenario} eval ${p.label}: success ${p.successRate.toFixed(3)} ${JSON.stringify(p.byTask)}`);
    });
    ctx.log(`${options.scenario} report: ${writeDemoReport(result)}`);
    return result;
  };
  const optionsOf = (scenario: ScenarioName, model?: string): DemoOptions => ({
    ...DEFAULT_DEMO,
    ...scenarioDefaults(scenario),
    scenario,
    ...(model ? { model } : {}),
    ...(steps ? { steps: Number(steps) } : {}),
    ...(evalTasks ? { evalTasks: Number(evalTasks) } : {}),
    out: mkdtempSync(join(tmpdir(), `agentjet-bench-demo-${scenario}-`)),
  });

  const rows: Row[] = [];
  const results = [];
  for (const scenario of scenarios) {
    const result = await run(optionsOf(scenario));
    const summary: Record<string, unknown> = demoSummary(result);
    for (const task of result.tasks) {
      const row: Row = {
        scenario,
        task: task.name,
        held_out: task.evalAfter.episodes,
        before: task.evalBefore.successRate,
        after: task.evalAfter.successRate,
        gain_pp: Math.round((task.evalAfter.successRate - task.evalBefore.successRate) * 1000) / 10,
        steps: result.steps,
        wall_s: result.wall_s,
      };
      // A team's roles: each role's own reward on the held-out tasks.
      for (const [role, r] of Object.entries(task.roles ?? {})) {
        row[`${role}_before`] = r.before;
        row[`${role}_after`] = r.after;
      }
      if (scenario === 'cocktail') {
        // The same model, settings (the KL coefficient too) and steps, on this task alone: with the cocktail's whole
        // batch (every episode of a step is this task's), and with the task's own share of it (its weight's share of
        // the batch's tasks: as many of its episodes as it had in the cocktail), which tells interference from budget.
        const weights = result.tasks.reduce((sum, t) => sum + t.weight, 0);
        const aloneOn = (batchTasks: number) =>
          run({ ...optionsOf(ALONE[task.name], SCENARIO_MODELS.cocktail), steps: result.steps, batchTasks, groupSize: result.options.groupSize, learningRate: result.options.learningRate, klCoef: result.options.klCoef });
        const shareTasks = Math.max(1, Math.round((result.options.batchTasks * task.weight) / weights));
        const alone = await aloneOn(result.options.batchTasks);
        const share = await aloneOn(shareTasks);
        row.alone_after = alone.eval_after;
        row.vs_alone_pp = Math.round((task.evalAfter.successRate - alone.eval_after) * 1000) / 10;
        row.share_batch_tasks = shareTasks;
        row.alone_share_after = share.eval_after;
        row.vs_alone_share_pp = Math.round((task.evalAfter.successRate - share.eval_after) * 1000) / 10;
        (summary.tasks as Record<string, Record<string, unknown>>)[task.name].alone = { eval_before: alone.eval_before, eval_after: alone.eval_after, wall_s: alone.wall_s };
        (summary.tasks as Record<string, Record<string, unknown>>)[task.name].alone_share = { batch_tasks: shareTasks, eval_before: share.eval_before, eval_after: share.eval_after, wall_s: share.wall_s };
      }
      rows.push(row);
    }
    results.push(summary);
  }
  console.log(formatTable(rows));
  return results.length === 1 ? results[0] : { scenarios: results };
}
