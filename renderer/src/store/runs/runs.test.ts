import { describe, expect, it } from 'vitest';
import { MAX_COMPARED_RUNS } from '../../../../swarm/common/runs-api.ts';
import { createAppStore } from '../index.ts';
import { configDiffRows, configRows } from './config.ts';
import { comparePath, runPath, runsRoute } from './route.ts';
import { runsSelectors } from './selectors.ts';
import { runDetail, runStep, runSummary, trainingConfig } from './testing/fixtures.ts';

describe('runs list', () => {
  it('fills the list page by page, newest first, and cuts it to the total', () => {
    const store = createAppStore();
    store.getState().runsPageLoaded(0, [runSummary(9), runSummary(8)], 3);
    store.getState().runsPageLoaded(2, [runSummary(7)], 3);
    expect(store.getState().runs.list.map((r) => r.id)).toEqual(['run-9', 'run-8', 'run-7']);
    // A refresh of the first page keeps the rows after it until their page comes again.
    store.getState().runsPageLoaded(0, [runSummary(9)], 2);
    expect(store.getState().runs.list.map((r) => r.id)).toEqual(['run-9', 'run-8']);
  });

  it('shows a run seen twice (the list moved between pages) once', () => {
    const store = createAppStore();
    store.getState().runsPageLoaded(0, [runSummary(9), runSummary(8)], 3);
    store.getState().runsPageLoaded(2, [runSummary(8), runSummary(7)], 3);
    expect(store.getState().runs.list.map((r) => r.id)).toEqual(['run-9', 'run-8', 'run-7']);
  });

  it('puts a new run from a `run` event at its place and updates a known one in place, detail included', () => {
    const store = createAppStore();
    store.getState().runsPageLoaded(0, [runSummary(5), runSummary(3)], 2);
    store.getState().runUpdated(runSummary(4));
    store.getState().runUpdated(runSummary(9, { status: 'running', endedAt: null }));
    expect(store.getState().runs.list.map((r) => r.id)).toEqual(['run-9', 'run-5', 'run-4', 'run-3']);
    expect(store.getState().runs.total).toBe(4);
    store.getState().runDetailLoaded(runDetail(5, { status: 'running' }));
    store.getState().runUpdated(runSummary(5, { status: 'failed', steps: 12 }));
    expect(store.getState().runs.list[1].status).toBe('failed');
    expect(store.getState().runs.total).toBe(4);
    const detail = runsSelectors.record(store.getState().runs, 'run-5').detail!;
    expect(detail.status).toBe('failed');
    expect(detail.config).toEqual(trainingConfig()); // the event carries no config: the detail keeps its own
  });

  it('checks 2 to MAX_COMPARED_RUNS runs for a comparison, in the order checked', () => {
    const store = createAppStore();
    const toggle = (id: string) => store.getState().runSelectionToggled(id);
    toggle('a');
    expect(runsSelectors.canCompare(store.getState().runs.selection)).toBe(false);
    toggle('b');
    expect(runsSelectors.canCompare(store.getState().runs.selection)).toBe(true);
    for (let i = 0; i < MAX_COMPARED_RUNS + 2; i++) toggle(`r${i}`);
    expect(store.getState().runs.selection).toHaveLength(MAX_COMPARED_RUNS);
    expect(store.getState().runs.selection.slice(0, 2)).toEqual(['a', 'b']);
    toggle('a');
    expect(store.getState().runs.selection[0]).toBe('b');
    store.getState().runSelectionCleared();
    expect(store.getState().runs.selection).toEqual([]);
  });
});

describe('run steps', () => {
  it('appends steps after the last run step held, in order, and ignores repeats', () => {
    const store = createAppStore();
    store.getState().runStepsReceived('run-1', [runStep(2), runStep(1)]);
    store.getState().runStepsReceived('run-1', [runStep(2), runStep(3)]);
    const record = runsSelectors.record(store.getState().runs, 'run-1');
    expect(record.steps.map((s) => s.runStep)).toEqual([1, 2, 3]);
    expect(runsSelectors.lastRunStep(record)).toBe(3);
    expect(record.version).toBe(2);
    // Nothing new: the same record, so charts do not redraw.
    store.getState().runStepsReceived('run-1', [runStep(3)]);
    expect(runsSelectors.record(store.getState().runs, 'run-1')).toBe(record);
  });

  it('marks an empty history as loaded', () => {
    const store = createAppStore();
    store.getState().runStepsReceived('run-1', []);
    expect(runsSelectors.record(store.getState().runs, 'run-1').stepsLoaded).toBe(true);
  });

  it('sums the versions of the runs on a page, so an overlay redraws when any of them moves', () => {
    const store = createAppStore();
    const version = () => runsSelectors.chartsVersion(store.getState().runs, ['run-1', 'run-2']);
    const before = version();
    store.getState().runStepsReceived('run-2', [runStep(1)]);
    expect(version()).toBeGreaterThan(before);
  });
});

describe('comparison', () => {
  it('keeps the details and differing keys for exactly the ids asked', () => {
    const store = createAppStore();
    store.getState().comparisonLoaded(['run-1', 'run-2'], { runs: [runDetail(1), runDetail(2)], differingKeys: ['seed'] });
    const runs = store.getState().runs;
    expect(runsSelectors.details(runs, ['run-1', 'run-2'])?.map((d) => d.id)).toEqual(['run-1', 'run-2']);
    expect(runsSelectors.details(runs, ['run-1', 'run-3'])).toBeNull();
    expect(runsSelectors.differingKeys(runs, ['run-1', 'run-2'])).toEqual(['seed']);
    expect(runsSelectors.differingKeys(runs, ['run-2', 'run-1'])).toBeNull();
  });
});

describe('config tables', () => {
  it('flattens the resolved config to dot paths, highlighting keys changed from the defaults', () => {
    const rows = configRows(trainingConfig({ learningRate: 3e-5 }), ['train.learningRate']);
    const byKey = new Map(rows.map((r) => [r.key, r]));
    expect(byKey.get('train.learningRate')).toEqual({ key: 'train.learningRate', value: '0.00003', highlighted: true });
    expect(byKey.get('train.klCoef')?.highlighted).toBe(false);
    expect(byKey.get('lora')?.value).toBe('null');
    expect(configRows({ lr: 3 * 1e-5 }, [])[0].value).toBe('0.00003'); // float noise is not a difference to show
    expect(rows.map((r) => r.key)).toEqual([...rows.map((r) => r.key)].sort((a, b) => a.localeCompare(b)));
  });

  it('highlights every key under a changed parent (lora turned on)', () => {
    const rows = configRows({ lora: { rank: 8, alpha: 16 } }, ['lora']);
    expect(rows.every((r) => r.highlighted)).toBe(true);
  });

  it('lists every key of the compared runs, the differing ones flagged, even one only some runs have', () => {
    const a = trainingConfig({ learningRate: 1e-5 });
    const b = trainingConfig({ learningRate: 3e-5 });
    const c = { ...trainingConfig({ learningRate: 1e-5 }), maxSteps: 50 };
    const rows = configDiffRows([a, b, c], ['train.learningRate']);
    const byKey = new Map(rows.map((r) => [r.key, r]));
    expect(byKey.get('train.learningRate')).toMatchObject({ differs: true, values: ['0.00001', '0.00003', '0.00001'] });
    expect(byKey.get('train.klCoef')?.differs).toBe(false);
    expect(byKey.get('maxSteps')).toMatchObject({ differs: true, values: ['—', '—', '50'] });
    // Six top-level leaves (maxSteps included) and train's five: none left out.
    expect(rows).toHaveLength(11);
  });
});

describe('runs routes', () => {
  it('reads and writes the places inside the Runs view', () => {
    expect(runsRoute('')).toEqual({ kind: 'list' });
    expect(runsRoute(runPath('tiny-3'))).toEqual({ kind: 'run', id: 'tiny-3' });
    expect(runsRoute(comparePath(['a', 'b']))).toEqual({ kind: 'compare', ids: ['a', 'b'] });
  });

  it('measures a run from its start to its end, or to now while it runs', () => {
    const ended = runSummary(1);
    expect(runsSelectors.durationS(ended, 0)).toBe(30);
    const running = runSummary(1, { endedAt: null });
    expect(runsSelectors.durationS(running, Date.parse(running.createdAt) + 5_000)).toBe(5);
  });
});
