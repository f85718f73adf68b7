/** Control-API calls of the Research view. */
import type { StoreApi } from 'zustand';
import type { StudyDetail, StudySummary } from '../../../../swarm/common/research-api.ts';
import type { ApiRequest } from '../../api/client.ts';
import { describeError } from '../../api/errors.ts';
import type { AppStore } from '../types.ts';

const enc = encodeURIComponent;
/** A live study's detail is refetched at most this often, however many `study` events arrive. */
export const STUDY_REFRESH_MIN_MS = 2_000;

export async function loadStudies(store: StoreApi<AppStore>, request: ApiRequest): Promise<void> {
  try {
    const { studies } = await request<{ studies: StudySummary[] }>('GET', '/studies');
    store.getState().studiesLoaded(studies);
  } catch (error) {
    store.getState().studiesListFailed(describeError(error));
  }
}

export async function loadStudyDetail(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  id: string,
): Promise<void> {
  try {
    store.getState().studyDetailLoaded(await request<StudyDetail>('GET', `/studies/${enc(id)}`));
  } catch (error) {
    store.getState().studyDetailFailed(id, describeError(error));
  }
}

/** Stops or resumes a study; the answer's summary goes to the store, a refusal is thrown (the view names it). */
export async function studyAction(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  id: string,
  action: 'stop' | 'resume',
): Promise<void> {
  store.getState().studyUpdated(await request<StudySummary>('POST', `/studies/${enc(id)}/${action}`));
}

/** The report's path under the API root (fetched with the token: a plain link could not send it). */
export function studyReportPath(id: string): string {
  return `/studies/${enc(id)}/report.html`;
}

export interface Throttle {
  /** Runs the work now if it has not run for `minMs`, else once at the end of that wait (however many asked). */
  call(): void;
  cancel(): void;
}

/** At most one run of `work` per `minMs`, the last call never lost: a burst of events costs two requests. */
export function throttle(work: () => void, minMs: number, now: () => number = Date.now): Throttle {
  let last = -Infinity;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const run = () => {
    timer = null;
    last = now();
    work();
  };
  return {
    call() {
      if (timer !== null) return;
      const wait = last + minMs - now();
      if (wait <= 0) run();
      else timer = setTimeout(run, wait);
    },
    cancel() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
  };
}
