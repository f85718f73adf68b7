/**
 * A study's analysis from its runs' stored numbers: per arm (and step budget) the metric of every seed with its
 * mean and 95% interval, bands over seeds of the reward and held-out curves, the decision against the criterion
 * written before any result, and the threats to validity a reviewer would raise.
 */
import type { ArmAnalysis, BandPoint, StudyAnalysis } from '../../common/research-api.ts';
import { BEST_ARM, decide, describeCriterion, type DecisionCriterion } from '../../common/research/decision.ts';
import { curveBand, tInterval } from '../../common/research/stats.ts';
import type { StudyRunRow } from '../store/studies.ts';
import type { Study } from './study-file.ts';

/** Fewer seeds than this per arm leave an interval too wide to trust (t(0.975, 1) = 12.7). */
const FEW_SEEDS = 3;
/** Below this many held-out episodes per run, one run's success rate moves by ≥ 0.07 from sampling alone. */
const FEW_EVAL_EPISODES = 50;

export function analyseStudy(study: Study, runs: readonly StudyRunRow[]): StudyAnalysis {
  const arms = armAnalyses(runs);
  const lastStage = study.stages.length - 1;
  const decisive = decisiveArms(arms.filter((a) => a.stage === lastStage));
  const criterion = study.decision as DecisionCriterion;
  const best = criterion.kind === 'threshold' && criterion.arm === BEST_ARM ? bestArm(decisive) : null;
  const metrics = Object.fromEntries(decisive.map((a) => [a.arm, a.values.map((v) => v.value)]));
  const decision = decide(criterion, metrics, best ?? undefined);
  return {
    metric: study.metric.kind === 'last-k-reward' ? `mean rollout reward of the last ${study.metric.k} steps` : study.metric.kind,
    arms,
    best,
    decision,
    criterion: describeCriterion(criterion),
    threats: threats(study, runs, decisive, best),
  };
}

/** One entry per (stage, arm, steps), in the order the runs were planned. */
function armAnalyses(runs: readonly StudyRunRow[]): ArmAnalysis[] {
  const groups = new Map<string, StudyRunRow[]>();
  for (const run of runs) {
    const key = `${run.stage}\u0000${run.arm}\u0000${run.steps}`;
    groups.set(key, [...(groups.get(key) ?? []), run]);
  }
  return [...groups.values()].map((group) => {
    const first = group[0];
    const done = group.filter((r) => r.status === 'done' && r.metric !== null);
    const values = done.map((r) => ({ seed: r.seed, value: r.metric! }));
    const interval = tInterval(values.map((v) => v.value));
    const curves = group.filter((r) => r.curve);
    return {
      stage: first.stage,
      arm: first.arm,
      params: first.params,
      steps: first.steps,
      values,
      n: values.length,
      mean: values.length ? interval.mean : null,
      low: interval.low,
      high: interval.high,
      failed: group.filter((r) => r.status === 'failed' || r.status === 'stopped').length,
      rewardBand: band(curves.map((r) => r.curve!.steps.filter((s) => s.step <= r.steps).map((s) => ({ step: s.step, value: s.rewardMean })))),
      evalBand: band(curves.map((r) => r.curve!.evals.filter((e) => e.step <= r.steps).map((e) => ({ step: e.step, value: e.successRate })))),
    };
  });
}

function band(curves: { step: number; value: number }[][]): BandPoint[] {
  return curveBand(curves.filter((c) => c.length > 0));
}

/** The arms the decision is made on: each arm of the last stage at the largest budget it reached. */
function decisiveArms(arms: readonly ArmAnalysis[]): ArmAnalysis[] {
  const top = new Map<string, ArmAnalysis>();
  for (const arm of arms) {
    const seen = top.get(arm.arm);
    if (!seen || arm.steps > seen.steps) top.set(arm.arm, arm);
  }
  return [...top.values()];
}

/** The best arm among those that reached the largest budget (successive halving's survivors). */
function bestArm(arms: readonly ArmAnalysis[]): string | null {
  const maxSteps = Math.max(...arms.map((a) => a.steps));
  const finalists = arms.filter((a) => a.steps === maxSteps && a.mean !== null);
  finalists.sort((a, b) => b.mean! - a.mean!);
  return finalists[0]?.arm ?? null;
}

function threats(study: Study, runs: readonly StudyRunRow[], decisive: readonly ArmAnalysis[], best: string | null): string[] {
  const out: string[] = [];
  const thin = decisive.filter((a) => a.n < FEW_SEEDS);
  if (thin.length) out.push(`Few seeds: ${thin.map((a) => `${a.arm} has ${a.n}`).join(', ')} finished run(s); intervals from fewer than ${FEW_SEEDS} are wide and fragile.`);
  const evalSizes = runs.map((r) => r.curve?.finalEval?.episodes).filter((n): n is number => n !== undefined);
  if (study.metric.kind.startsWith('final-eval') && evalSizes.length && Math.min(...evalSizes) < FEW_EVAL_EPISODES) {
    const n = Math.min(...evalSizes);
    out.push(`Eval noise: a run's held-out metric comes from as few as ${n} episodes (a success rate near 0.5 has a standard error of about ${(0.5 / Math.sqrt(n)).toFixed(2)}).`);
  }
  const failed = runs.filter((r) => r.status === 'failed');
  if (failed.length) out.push(`Failed runs: ${failed.length} (${[...new Set(failed.map((r) => r.reason))].slice(0, 3).join('; ')}); their arms are judged on the runs that finished.`);
  const stopped = runs.filter((r) => r.status === 'stopped');
  if (stopped.length) out.push(`Stopped runs: ${stopped.length} ended early (${[...new Set(stopped.map((r) => r.reason))].slice(0, 3).join('; ')}) and count as unmeasured.`);
  const pending = runs.filter((r) => r.status === 'pending' || r.status === 'running');
  if (pending.length) out.push(`Budget cut: ${pending.length} planned run(s) never finished.`);
  if (best && decisive.length > 1) out.push(`Selection: the best of ${decisive.length} arms is judged on the same runs it was selected by, which flatters it (winner's curse); confirm it in a stage of its own.`);
  const lastStageRuns = runs.filter((r) => r.stage === study.stages.length - 1);
  if (lastStageRuns.some((r) => r.steps < Math.max(...lastStageRuns.map((x) => x.steps)))) {
    out.push('Unequal budgets: arms of the last stage trained different numbers of steps (successive halving); compare arms at the same budget.');
  }
  return out;
}
