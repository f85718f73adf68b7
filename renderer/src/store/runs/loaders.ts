/** Control-API calls of the Runs view (and of the Models page, for a model's current run). */
import type { StoreApi } from 'zustand';
import type { RunStep } from '../../../../swarm/common/api.ts';
import type { RunComparison, RunDetail, RunEvalPoint, RunSummary, RunTaskRow } from '../../../../swarm/common/runs-api.ts';
import { queryString, type ApiRequest } from '../../api/client.ts';
import { describeError } from '../../api/errors.ts';
import type { AppStore } from '../types.ts';
import { runsSelectors } from './selectors.ts';

const enc = encodeURIComponent;
/** The first page is small, so the list paints at once; the rest comes in larger pages behind it. */
export const RUNS_FIRST_PAGE = 100;
export const RUNS_PAGE = 500;
/** Steps per request: the API's maximum, so a long run loads in a few round trips. */
const STEPS_PER_REQUEST = 10_000;

/** Every run, newest first, page by page (each page shows as it arrives). */
export async function loadRunsList(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  let offset = 0;
  for (;;) {
    const limit = offset === 0 ? RUNS_FIRST_PAGE : RUNS_PAGE;
    let page: { runs: RunSummary[]; total: number };
    try {
      page = await request<{ runs: RunSummary[]; total: number }>('GET', `/runs${queryString({ limit, offset })}`);
    } catch (error) {
      store.getState().runsListFailed(describeError(error));
      return;
    }
    store.getState().runsPageLoaded(offset, page.runs, page.total);
    offset += page.runs.length;
    if (page.runs.length < limit || offset >= page.total) return;
  }
}

/** Just the first page (what a screen shows), unless the list is already there; failures are left to the view. */
export async function prefetchRunsFirstPage(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  try {
    const page = await request<{ runs: RunSummary[]; total: number }>('GET', `/runs${queryString({ limit: RUNS_FIRST_PAGE, offset: 0 })}`);
    if (store.getState().runs.total === null) store.getState().runsPageLoaded(0, page.runs, page.total);
  } catch {
    // the view loads (and reports) the list when it opens
  }
}

/**
 * A live run's row brought up to date: the peer sends `run` events when a run's status, config or warnings change,
 * not per step, so a step of its model (`train-step`) refetches the run and keeps only its summary for the list.
 */
export async function refreshRunSummaries(store: StoreApi<AppStore>, request: ApiRequest, ids: readonly string[]): Promise<void> {
  await Promise.all(
    ids.map(async (id) => {
      try {
        store.getState().runUpdated(summaryOf(await request<RunDetail>('GET', `/runs/${enc(id)}`)));
      } catch {
        // the row keeps what it showed; the next step or event tries again
      }
    }),
  );
}

function summaryOf(detail: RunDetail): RunSummary {
  const { config: _config, changedFromDefaults: _changed, events: _events, scripts: _scripts, checkpoints: _checkpoints, stepOffset: _offset, ...summary } = detail;
  return summary;
}

export async function loadRunDetail(store: StoreApi<AppStore>, request: ApiRequest, id: string): Promise<void> {
  try {
    store.getState().runDetailLoaded(await request<RunDetail>('GET', `/runs/${enc(id)}`));
  } catch (error) {
    store.getState().runDetailFailed(id, describeError(error));
  }
}

/**
 * Fetches the run's steps after the last one held, page by page. Calls for one run while one is under way are
 * folded into a single further pass after it, so a burst of live triggers costs two requests, not one each.
 */
export function loadRunSteps(store: StoreApi<AppStore>, request: ApiRequest, id: string): Promise<void> {
  return coalesced(store, `steps:${id}`, async () => {
    for (;;) {
      const after = runsSelectors.lastRunStep(runsSelectors.record(store.getState().runs, id));
      let steps: RunStep[];
      try {
        ({ steps } = await request<{ steps: RunStep[] }>('GET', `/runs/${enc(id)}/steps${queryString({ after, limit: STEPS_PER_REQUEST })}`));
      } catch {
        return; // the detail's error already says why; the steps simply stay as they are
      }
      store.getState().runStepsReceived(id, steps);
      if (steps.length < STEPS_PER_REQUEST) return;
    }
  });
}

export async function loadRunEvals(store: StoreApi<AppStore>, request: ApiRequest, id: string): Promise<void> {
  try {
    const { evals } = await request<{ evals: RunEvalPoint[] }>('GET', `/runs/${enc(id)}/evals`);
    store.getState().runEvalsLoaded(id, evals);
  } catch {
    // no eval curve: the panel says there is none
  }
}

export async function loadRunTasks(store: StoreApi<AppStore>, request: ApiRequest, id: string): Promise<void> {
  try {
    const { tasks } = await request<{ tasks: RunTaskRow[] }>('GET', `/runs/${enc(id)}/tasks`);
    store.getState().runTasksLoaded(id, tasks);
  } catch {
    // the table stays as it was
  }
}

/** What the charts of a run need: its detail (events, config), steps and eval points. */
export async function loadRunCurves(store: StoreApi<AppStore>, request: ApiRequest, id: string): Promise<void> {
  await Promise.all([loadRunDetail(store, request, id), loadRunSteps(store, request, id), loadRunEvals(store, request, id)]);
}

/** The comparison (details + differing keys), then every run's steps and evals. */
export async function loadComparison(store: StoreApi<AppStore>, request: ApiRequest, ids: readonly string[]): Promise<void> {
  const curves = ids.flatMap((id) => [loadRunSteps(store, request, id), loadRunEvals(store, request, id)]);
  try {
    store.getState().comparisonLoaded(ids, await request<RunComparison>('GET', `/runs/compare${queryString({ ids: ids.join(',') })}`));
  } catch (error) {
    store.getState().comparisonFailed(ids, describeError(error));
  }
  await Promise.all(curves);
}

const running = new WeakMap<object, Map<string, { again: boolean; done: Promise<void> }>>();

/** Runs `work` unless a run of it under `key` is under way; then once more after that one, however many asked. */
function coalesced(owner: object, key: string, work: () => Promise<void>): Promise<void> {
  let byKey = running.get(owner);
  if (!byKey) running.set(owner, (byKey = new Map()));
  const current = byKey.get(key);
  if (current) {
    current.again = true;
    return current.done;
  }
  const entry = { again: false, done: Promise.resolve() };
  entry.done = (async () => {
    try {
      do {
        entry.again = false;
        await work();
      } while (entry.again);
    } finally {
      byKey.delete(key);
    }
  })();
  byKey.set(key, entry);
  return entry.done;
}
