/**
 * Training runs (GET /api/runs…, `run` events): the list of every run of the peer's data dir, newest first; the
 * runs checked for a comparison; and per run opened, its detail, steps (appended, never refetched), held-out eval
 * points and per-task table. A comparison's answer only adds its runs' details and the keys that differ.
 */
import type { StateCreator } from 'zustand';
import type { RunStep } from '../../../../swarm/common/api.ts';
import {
  MAX_COMPARED_RUNS,
  type RunComparison,
  type RunDetail,
  type RunEvalPoint,
  type RunSummary,
  type RunTaskRow,
} from '../../../../swarm/common/runs-api.ts';
import type { AppStore } from '../types.ts';

/** The most steps kept per run, as for a model's steps: more than any plot needs. */
export const MAX_RUN_STEPS_KEPT = 200_000;

export interface RunRecord {
  detail: RunDetail | null;
  /** Why the detail could not be loaded (an unknown id, an unreachable peer). */
  error: string | null;
  steps: readonly RunStep[];
  /** Bumps whenever steps or evals change, so charts redraw without comparing arrays. */
  version: number;
  stepsLoaded: boolean;
  evals: readonly RunEvalPoint[];
  tasks: readonly RunTaskRow[] | null;
}

export interface RunsState {
  /** Newest first, as GET /api/runs answers; pages arrive in order and replace what they cover. */
  list: readonly RunSummary[];
  /** Runs in the data dir (null before the first page). */
  total: number | null;
  listError: string | null;
  /** Runs checked for a comparison, in the order checked (at most MAX_COMPARED_RUNS). */
  selection: readonly string[];
  byId: Readonly<Record<string, RunRecord>>;
  /** The last comparison asked for: the ids (as `a,b,c`) and the keys whose values differ among them. */
  comparison: { ids: string; differingKeys: readonly string[]; error: string | null } | null;
}

export interface RunsActions {
  runsPageLoaded(offset: number, runs: readonly RunSummary[], total: number): void;
  runsListFailed(message: string): void;
  /** A `run` event: the run is new (it goes to its place, newest first) or changed (its row and detail follow). */
  runUpdated(run: RunSummary): void;
  runSelectionToggled(id: string): void;
  runSelectionCleared(): void;
  runDetailLoaded(detail: RunDetail): void;
  runDetailFailed(id: string, message: string): void;
  /** Steps fetched (GET …/steps?after=): those after the last one held are appended in order. */
  runStepsReceived(id: string, steps: readonly RunStep[]): void;
  runEvalsLoaded(id: string, evals: readonly RunEvalPoint[]): void;
  runTasksLoaded(id: string, tasks: readonly RunTaskRow[]): void;
  comparisonLoaded(ids: readonly string[], comparison: RunComparison): void;
  comparisonFailed(ids: readonly string[], message: string): void;
}

export type RunsSlice = { runs: RunsState } & RunsActions;

export const emptyRunRecord: RunRecord = {
  detail: null,
  error: null,
  steps: [],
  version: 0,
  stepsLoaded: false,
  evals: [],
  tasks: null,
};

export const initialRunsState: RunsState = { list: [], total: null, listError: null, selection: [], byId: {}, comparison: null };

export const createRunsSlice: StateCreator<AppStore, [], [], RunsSlice> = (set) => {
  const patch = (fn: (runs: RunsState) => Partial<RunsState> | null) =>
    set((store) => {
      const next = fn(store.runs);
      return next ? { runs: { ...store.runs, ...next } } : store;
    });
  const updateRun = (id: string, fn: (record: RunRecord) => RunRecord | null) =>
    patch((runs) => {
      const next = fn(runs.byId[id] ?? emptyRunRecord);
      return next ? { byId: { ...runs.byId, [id]: next } } : null;
    });
  return {
    runs: initialRunsState,
    runsPageLoaded: (offset, page, total) => patch((runs) => ({ list: withPage(runs.list, offset, page, total), total, listError: null })),
    runsListFailed: (message) => patch(() => ({ listError: message })),
    runUpdated: (run) =>
      patch((runs) => {
        const index = runs.list.findIndex((r) => r.id === run.id);
        const list = index === -1 ? insertNewestFirst(runs.list, run) : runs.list.map((r, i) => (i === index ? run : r));
        const record = runs.byId[run.id];
        const byId = record?.detail ? { ...runs.byId, [run.id]: { ...record, detail: { ...record.detail, ...run } } } : runs.byId;
        const total = index === -1 && runs.total !== null ? runs.total + 1 : runs.total;
        return { list, byId, total };
      }),
    runSelectionToggled: (id) =>
      patch((runs) => {
        if (runs.selection.includes(id)) return { selection: runs.selection.filter((s) => s !== id) };
        return runs.selection.length >= MAX_COMPARED_RUNS ? null : { selection: [...runs.selection, id] };
      }),
    runSelectionCleared: () => patch(() => ({ selection: [] })),
    runDetailLoaded: (detail) => updateRun(detail.id, (r) => ({ ...r, detail, error: null })),
    runDetailFailed: (id, message) => updateRun(id, (r) => ({ ...r, error: message })),
    runStepsReceived: (id, steps) =>
      updateRun(id, (r) => withSteps(r, steps) ?? (r.stepsLoaded ? null : { ...r, stepsLoaded: true })),
    runEvalsLoaded: (id, evals) =>
      updateRun(id, (r) => (sameEvals(r.evals, evals) ? null : { ...r, evals, version: r.version + 1 })),
    runTasksLoaded: (id, tasks) => updateRun(id, (r) => ({ ...r, tasks })),
    comparisonLoaded: (ids, comparison) =>
      patch((runs) => {
        const byId = { ...runs.byId };
        for (const detail of comparison.runs) byId[detail.id] = { ...(byId[detail.id] ?? emptyRunRecord), detail, error: null };
        return { byId, comparison: { ids: ids.join(','), differingKeys: comparison.differingKeys, error: null } };
      }),
    comparisonFailed: (ids, message) => patch(() => ({ comparison: { ids: ids.join(','), differingKeys: [], error: message } })),
  };
};

/** `list` with `page` in place from `offset`, cut to `total`; a run seen twice (the list moved between pages) once. */
function withPage(list: readonly RunSummary[], offset: number, page: readonly RunSummary[], total: number): RunSummary[] {
  const merged = [...list.slice(0, offset), ...page, ...list.slice(offset + page.length)];
  const seen = new Set<string>();
  const unique = merged.filter((run) => !seen.has(run.id) && seen.add(run.id));
  return unique.slice(0, total);
}

function insertNewestFirst(list: readonly RunSummary[], run: RunSummary): RunSummary[] {
  const at = list.findIndex((r) => r.createdAt <= run.createdAt);
  return at === -1 ? [...list, run] : [...list.slice(0, at), run, ...list.slice(at)];
}

function withSteps(record: RunRecord, steps: readonly RunStep[]): RunRecord | null {
  const last = record.steps.length ? record.steps[record.steps.length - 1].runStep : -Infinity;
  const fresh = steps.filter((s) => s.runStep > last).sort((a, b) => a.runStep - b.runStep);
  if (fresh.length === 0) return null;
  const all = [...record.steps, ...fresh];
  return {
    ...record,
    stepsLoaded: true,
    steps: all.length > MAX_RUN_STEPS_KEPT ? all.slice(-MAX_RUN_STEPS_KEPT) : all,
    version: record.version + 1,
  };
}

/** Eval points are refetched whole (a few dozen); an unchanged answer must not redraw the charts. */
function sameEvals(a: readonly RunEvalPoint[], b: readonly RunEvalPoint[]): boolean {
  return a.length === b.length && a.every((p, i) => p.step === b[i].step && p.episodes === b[i].episodes && p.time === b[i].time);
}
