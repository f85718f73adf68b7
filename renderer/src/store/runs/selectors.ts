import { MAX_COMPARED_RUNS, type RunDetail, type RunSummary } from '../../../../swarm/common/runs-api.ts';
import { emptyRunRecord, type RunRecord, type RunsState } from './slice.ts';

/** Fewest runs a comparison overlays: one run alone is its own page. */
export const MIN_COMPARED_RUNS = 2;

function record(runs: RunsState, id: string | null | undefined): RunRecord {
  return (id && runs.byId[id]) || emptyRunRecord;
}

function lastRunStep(record: RunRecord): number | undefined {
  return record.steps.length ? record.steps[record.steps.length - 1].runStep : undefined;
}

function canCompare(selection: readonly string[]): boolean {
  return selection.length >= MIN_COMPARED_RUNS && selection.length <= MAX_COMPARED_RUNS;
}

/** Seconds from the run's start to its end, or to `now` while it has none. */
function durationS(run: Pick<RunSummary, 'createdAt' | 'endedAt'>, now: number): number | null {
  const start = Date.parse(run.createdAt);
  const end = run.endedAt ? Date.parse(run.endedAt) : now;
  return Number.isFinite(start) && Number.isFinite(end) ? Math.max(0, (end - start) / 1000) : null;
}

/** Whether the run still moves (its numbers change while the page is open). */
function isLive(run: Pick<RunSummary, 'status'>): boolean {
  return run.status === 'running' || run.status === 'paused';
}

/** The details of `ids` held, in order; null until every one is loaded. */
function details(runs: RunsState, ids: readonly string[]): RunDetail[] | null {
  const found = ids.map((id) => runs.byId[id]?.detail ?? null);
  return found.every((d): d is RunDetail => d !== null) ? found : null;
}

/** What a chart's `version` is: moves whenever any of the runs' steps or evals change. */
function chartsVersion(runs: RunsState, ids: readonly string[]): number {
  return ids.reduce((sum, id) => sum + record(runs, id).version, 0);
}

/** The comparison's differing keys, once the answer for exactly these ids is in. */
function differingKeys(runs: RunsState, ids: readonly string[]): readonly string[] | null {
  return runs.comparison?.ids === ids.join(',') && !runs.comparison.error ? runs.comparison.differingKeys : null;
}

export const runsSelectors = { record, lastRunStep, canCompare, durationS, isLive, details, chartsVersion, differingKeys };
