/**
 * Research studies (GET /api/studies…, `study` events): the list of every study, newest first, and per study
 * opened, its detail (runs, events, analysis). A `study` event carries the study's summary: its row follows at
 * once, and the open study's detail is refetched (throttled, loaders.ts) for what the summary does not carry.
 */
import type { StateCreator } from 'zustand';
import type { StudyDetail, StudySummary } from '../../../../swarm/common/research-api.ts';
import type { AppStore } from '../types.ts';

export interface StudyRecord {
  detail: StudyDetail | null;
  /** Why the detail could not be loaded (an unknown id, an unreachable peer). */
  error: string | null;
  /** Bumps on every `study` event for this study: the open page's refetch trigger. */
  changes: number;
}

export interface ResearchState {
  /** Newest first, as GET /api/studies answers (null before the first answer). */
  list: readonly StudySummary[] | null;
  listError: string | null;
  byId: Readonly<Record<string, StudyRecord>>;
}

export interface ResearchActions {
  studiesLoaded(studies: readonly StudySummary[]): void;
  studiesListFailed(message: string): void;
  /** A `study` event (or a stop/resume answer): the study is new (it goes to its place, newest first) or changed. */
  studyUpdated(study: StudySummary): void;
  studyDetailLoaded(detail: StudyDetail): void;
  studyDetailFailed(id: string, message: string): void;
}

export type ResearchSlice = { research: ResearchState } & ResearchActions;

export const emptyStudyRecord: StudyRecord = { detail: null, error: null, changes: 0 };

export const initialResearchState: ResearchState = { list: null, listError: null, byId: {} };

export const createResearchSlice: StateCreator<AppStore, [], [], ResearchSlice> = (set) => {
  const patch = (fn: (research: ResearchState) => Partial<ResearchState> | null) =>
    set((store) => {
      const next = fn(store.research);
      return next ? { research: { ...store.research, ...next } } : store;
    });
  const updateStudy = (id: string, fn: (record: StudyRecord) => StudyRecord) =>
    patch((research) => ({ byId: { ...research.byId, [id]: fn(research.byId[id] ?? emptyStudyRecord) } }));
  return {
    research: initialResearchState,
    studiesLoaded: (studies) => patch(() => ({ list: [...studies], listError: null })),
    studiesListFailed: (message) => patch(() => ({ listError: message })),
    studyUpdated: (study) =>
      patch((research) => {
        const list = research.list ?? [];
        const index = list.findIndex((s) => s.id === study.id);
        const nextList =
          index === -1 ? insertNewestFirst(list, study) : list.map((s, i) => (i === index ? study : s));
        const record = research.byId[study.id] ?? emptyStudyRecord;
        const detail = record.detail ? { ...record.detail, ...study } : null;
        return {
          list: nextList,
          byId: { ...research.byId, [study.id]: { ...record, detail, changes: record.changes + 1 } },
        };
      }),
    studyDetailLoaded: (detail) => updateStudy(detail.id, (r) => ({ ...r, detail, error: null })),
    studyDetailFailed: (id, message) => updateStudy(id, (r) => ({ ...r, error: message })),
  };
};

function insertNewestFirst(list: readonly StudySummary[], study: StudySummary): StudySummary[] {
  const at = list.findIndex((s) => s.createdAt <= study.createdAt);
  return at === -1 ? [...list, study] : [...list.slice(0, at), study, ...list.slice(at)];
}
