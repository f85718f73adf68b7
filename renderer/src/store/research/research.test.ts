import { afterEach, describe, expect, it, vi } from 'vitest';
import type { StudyDetail, StudySummary } from '../../../../swarm/common/research-api.ts';
import type { ApiRequest } from '../../api/client.ts';
import { createAppStore } from '../index.ts';
import { loadStudies, loadStudyDetail, studyAction, throttle } from './loaders.ts';
import { researchRoute, studyPath } from './route.ts';
import { researchSelectors } from './selectors.ts';
import { armAnalysis, studyDetail, studySummary } from './testing/fixtures.ts';

describe('studies list', () => {
  it('is null before the first answer, then the studies newest first', async () => {
    const store = createAppStore();
    expect(store.getState().research.list).toBeNull();
    const request = (async () => ({ studies: [studySummary(2), studySummary(1)] })) as ApiRequest;
    await loadStudies(store, request);
    expect(store.getState().research.list!.map((s) => s.id)).toEqual(['study-2', 'study-1']);
    expect(store.getState().research.listError).toBeNull();
  });

  it('keeps the list and names the error when the peer refuses', async () => {
    const store = createAppStore();
    store.getState().studiesLoaded([studySummary(1)]);
    const request = (async () => {
      throw Object.assign(new Error('no such route'), { name: 'NotFoundError' });
    }) as ApiRequest;
    await loadStudies(store, request);
    expect(store.getState().research.listError).toBe('NotFoundError: no such route');
    expect(store.getState().research.list).toHaveLength(1);
  });

  it('puts a new study from a `study` event at its place and updates a known one, detail included', () => {
    const store = createAppStore();
    store.getState().studiesLoaded([studySummary(5), studySummary(3)]);
    store.getState().studyUpdated(studySummary(4));
    store.getState().studyUpdated(studySummary(9));
    expect(store.getState().research.list!.map((s) => s.id)).toEqual([
      'study-9',
      'study-5',
      'study-4',
      'study-3',
    ]);
    store.getState().studyDetailLoaded(studyDetail(5));
    const before = researchSelectors.record(store.getState().research, 'study-5').changes;
    store.getState().studyUpdated(studySummary(5, { status: 'done', decision: 'met' }));
    const record = researchSelectors.record(store.getState().research, 'study-5');
    expect(store.getState().research.list![1].status).toBe('done');
    expect(record.detail!.status).toBe('done');
    expect(record.detail!.decision).toBe('met');
    expect(record.detail!.studyRuns).toHaveLength(2); // the event carries no runs: the detail keeps its own
    expect(record.changes).toBe(before + 1);
  });

  it('lists a study from an event before the first answer came', () => {
    const store = createAppStore();
    store.getState().studyUpdated(studySummary(1));
    expect(store.getState().research.list!.map((s) => s.id)).toEqual(['study-1']);
  });
});

describe('study detail', () => {
  it('loads a study, or names why it could not', async () => {
    const store = createAppStore();
    await loadStudyDetail(store, (async () => studyDetail(1)) as ApiRequest, 'study-1');
    expect(researchSelectors.record(store.getState().research, 'study-1').detail?.hypothesis).toMatch(/KL/);
    const refuse = (async () => {
      throw Object.assign(new Error('no study "x"'), { name: 'NotFoundError' });
    }) as ApiRequest;
    await loadStudyDetail(store, refuse, 'x');
    expect(researchSelectors.record(store.getState().research, 'x')).toMatchObject({
      detail: null,
      error: 'NotFoundError: no study "x"',
    });
  });

  it('stops and resumes through the routes, the answer updating the row', async () => {
    const store = createAppStore();
    store.getState().studiesLoaded([studySummary(1)]);
    const calls: string[] = [];
    const request = (async (method: string, path: string) => {
      calls.push(`${method} ${path}`);
      return studySummary(1, { status: path.endsWith('/stop') ? 'stopped' : 'running' }) as StudySummary;
    }) as ApiRequest;
    await studyAction(store, request, 'study-1', 'stop');
    expect(store.getState().research.list![0].status).toBe('stopped');
    await studyAction(store, request, 'study-1', 'resume');
    expect(calls).toEqual(['POST /studies/study-1/stop', 'POST /studies/study-1/resume']);
    expect(store.getState().research.list![0].status).toBe('running');
  });

  it('says the criterion: the analysis’s once analysed, else the spec’s decision in words', () => {
    const detail: StudyDetail = studyDetail(1);
    expect(researchSelectors.criterion(detail)).toMatch(/kl-0\.05's metric exceeds kl-0's by ≥ 0\.05/);
    const analysed = studyDetail(1, {
      analysis: {
        metric: 'final-eval-success',
        arms: [armAnalysis('kl-0')],
        best: null,
        decision: null,
        criterion: 'as written',
        threats: [],
      },
    });
    expect(researchSelectors.criterion(analysed)).toBe('as written');
    expect(researchSelectors.criterion(studyDetail(1, { spec: {} }))).toBeNull();
  });

  it('offers stop while under way and resume once stopped or failed', () => {
    expect(researchSelectors.canStop('running')).toBe(true);
    expect(researchSelectors.canStop('done')).toBe(false);
    expect(researchSelectors.canResume('stopped')).toBe(true);
    expect(researchSelectors.canResume('running')).toBe(false);
    expect(researchSelectors.isLive(studySummary(1, { status: 'stopping' }))).toBe(true);
    expect(researchSelectors.isLive(studySummary(1, { status: 'done' }))).toBe(false);
  });
});

describe('research route', () => {
  it('reads the list and a study page, and writes a study id back', () => {
    expect(researchRoute('')).toEqual({ kind: 'list' });
    expect(researchRoute(studyPath('a b/c'))).toEqual({ kind: 'study', id: 'a b/c' });
  });
});

describe('throttle', () => {
  afterEach(() => vi.useRealTimers());

  it('runs at once, then at most once per wait, the last call kept', () => {
    vi.useFakeTimers();
    const work = vi.fn();
    const t = throttle(work, 2_000);
    t.call();
    expect(work).toHaveBeenCalledTimes(1);
    t.call();
    t.call();
    t.call();
    expect(work).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1_999);
    expect(work).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1);
    expect(work).toHaveBeenCalledTimes(2);
    vi.advanceTimersByTime(5_000);
    t.call();
    expect(work).toHaveBeenCalledTimes(3);
    t.call();
    t.cancel();
    vi.advanceTimersByTime(5_000);
    expect(work).toHaveBeenCalledTimes(3);
  });
});
