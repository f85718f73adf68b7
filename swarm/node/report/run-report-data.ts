/**
 * What a run's report shows, read from the store (a running peer's or a stopped one's): the run's detail, its
 * standing steps reduced to the numbers the plots draw, held-out evals, all train rollouts per policy version, and
 * the per-task table. Steps are streamed and thinned as they are read, so a run of any length reports in bounded
 * memory.
 */
import type { Database } from 'better-sqlite3';
import type { RunStep } from '../../common/api.ts';
import type { RunDetail, RunEvalPoint, RunTaskRow } from '../../common/runs-api.ts';
import { runRollouts, type RunRolloutPoint } from '../store/run-reports.ts';
import { iterateRunSteps, runEvals, runTasks } from '../store/training-runs.ts';
import { requireRun, runDetail } from '../training/run-views.ts';

/** The most steps a plot draws: more points than a 560 px chart has pixels only make the file bigger. */
export const MAX_PLOTTED_STEPS = 2_000;
/** Rows of the per-task table: the most-run tasks of each split, enough to see which ones the policy fails. */
export const REPORT_TASKS_MAX = 50;

/** One standing step, as the plots and the steps table read it. */
export interface ReportStep {
  step: number;
  time: string;
  rewardMean: number;
  rewardStd: number | null;
  successRate: number | null;
  loss: number;
  kl: number;
  clipFraction: number;
  entropy: number;
  gradNorm: number;
  responseTokensMean: number | null;
  discardedShare: number | null;
  /** Tokens the trainer processed per second of its own update. */
  trainerTokensPerS: number | null;
  /** Tokens the batch's episodes generated per second of rollout. */
  rolloutTokensPerS: number | null;
  /** Naive tokens ÷ merged tokens of the batch. */
  mergeRatio: number | null;
  naiveTokens: number | null;
  mergedTokens: number;
}

export interface RunReportData {
  detail: RunDetail;
  /** Standing steps, every `stride`-th when the run has more than MAX_PLOTTED_STEPS (the last one always). */
  steps: ReportStep[];
  stride: number;
  evals: RunEvalPoint[];
  rollouts: RunRolloutPoint[];
  tasks: RunTaskRow[];
  /** Σ naive and Σ merged tokens over the steps that recorded both. */
  mergeTotals: { naive: number; merged: number };
  /** When the report was read (the duration of a run still going). */
  readAt: string;
}

export function reportStep(s: RunStep): ReportStep {
  const m = s.metrics;
  return {
    step: s.runStep,
    time: s.time,
    rewardMean: s.rewardMean,
    rewardStd: s.rewardStd ?? null,
    successRate: s.successRate ?? null,
    loss: m.loss,
    kl: m.kl,
    clipFraction: m.clipFraction,
    entropy: m.entropy,
    gradNorm: m.gradNorm,
    responseTokensMean: s.responseTokensMean ?? null,
    discardedShare: s.discardedShare ?? null,
    trainerTokensPerS: m.timeMs > 0 ? m.tokens / (m.timeMs / 1000) : null,
    rolloutTokensPerS: s.rolloutTokensPerS ?? null,
    mergeRatio: s.naiveTokens !== undefined && m.tokens > 0 ? s.naiveTokens / m.tokens : null,
    naiveTokens: s.naiveTokens ?? null,
    mergedTokens: m.tokens,
  };
}

/** Throws RunNotFoundError for an unknown id. */
export function readRunReport(db: Database, runId: string, now = new Date()): RunReportData {
  const run = requireRun(db, runId);
  const detail = runDetail(db, run);
  const stride = Math.max(1, Math.ceil(detail.steps / MAX_PLOTTED_STEPS));
  const steps: ReportStep[] = [];
  const mergeTotals = { naive: 0, merged: 0 };
  let seen = 0;
  let last: ReportStep | undefined;
  for (const step of iterateRunSteps(db, run)) {
    if (step.revertedAt) continue; // its update was lost: not part of the curve
    const row = reportStep(step);
    if (row.naiveTokens !== null) {
      mergeTotals.naive += row.naiveTokens;
      mergeTotals.merged += row.mergedTokens;
    }
    last = row;
    if (seen++ % stride === 0) steps.push(row);
  }
  if (last && steps.at(-1) !== last) steps.push(last);
  return {
    detail,
    steps,
    stride,
    evals: runEvals(db, run),
    rollouts: runRollouts(db, run),
    tasks: runTasks(db, run, REPORT_TASKS_MAX),
    mergeTotals,
    readAt: now.toISOString(),
  };
}
