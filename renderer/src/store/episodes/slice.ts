/**
 * The episode list as a window over the control API: pages are fetched as they scroll into view and kept in a
 * bounded cache, so 100,000 episodes cost a few pages of memory. A filter change starts a new generation (the
 * answers of older requests are dropped); a refresh keeps the rows on screen until their fresh page arrives.
 */
import type { StateCreator } from 'zustand';
import type { AppStore } from '../types.ts';
import type { CompareSide, EpisodeComparison, EpisodeDetail, EpisodeFilter, EpisodeListItem, EpisodePage } from './types.ts';

/** Rows per request: a screenful several times over, small enough to answer in milliseconds. */
export const EPISODE_PAGE_SIZE = 100;
/** Pages kept in memory; pages far from the last loaded one are dropped first. */
export const MAX_CACHED_PAGES = 30;

export interface CachedPage {
  /** The generation it was loaded in: older than the current one means stale (shown, but refetched). */
  generation: number;
  rows: readonly EpisodeListItem[];
}

export interface EpisodesState {
  filter: EpisodeFilter;
  generation: number;
  /** Episodes matching the filter (null before the first page). */
  total: number | null;
  pages: Readonly<Record<number, CachedPage>>;
  /** Page index → the generation it was requested in. */
  pending: Readonly<Record<number, number>>;
  error: string | null;
  selectedId: string | null;
  detail: EpisodeDetail | null;
  detailError: string | null;
  /** "Compare versions" (null while closed): two episodes of one task side by side. */
  compare: EpisodeComparison | null;
  /** The latest comparison request's number. */
  compareRequests: number;
}

export interface EpisodesActions {
  episodeFilterChanged(patch: Partial<EpisodeFilter>): void;
  /** New episodes arrived: refetch what is on screen without blanking it. */
  episodesRefreshed(): void;
  episodePagesRequested(generation: number, pageIndexes: readonly number[]): void;
  episodePageLoaded(generation: number, pageIndex: number, page: EpisodePage): void;
  episodePageFailed(generation: number, pageIndex: number, message: string): void;
  episodeSelected(id: string | null): void;
  episodeDetailLoaded(detail: EpisodeDetail): void;
  episodeDetailFailed(id: string, message: string): void;
  /** Opens "Compare versions" with a proposal (task, versions) and nothing asked yet. */
  episodeCompareOpened(taskId: string, versions: readonly [number, number]): void;
  /** Starts a comparison of `taskId` at two versions; returns its request number (for the answers). */
  episodeCompareStarted(taskId: string, versions: readonly [number, number]): number;
  episodeCompareSideLoaded(request: number, index: 0 | 1, side: CompareSide): void;
  episodeCompareFailed(request: number, message: string): void;
  episodeCompareClosed(): void;
}

export type EpisodesSlice = { episodes: EpisodesState } & EpisodesActions;

export const emptyEpisodeFilter: EpisodeFilter = {
  model: '',
  taskId: '',
  kind: '',
  state: '',
  client: '',
  policyVersion: '',
  query: '',
  sort: 'newest',
};

export const initialEpisodesState: EpisodesState = {
  filter: emptyEpisodeFilter,
  generation: 0,
  total: null,
  pages: {},
  pending: {},
  error: null,
  selectedId: null,
  detail: null,
  detailError: null,
  compare: null,
  compareRequests: 0,
};

export const createEpisodesSlice: StateCreator<AppStore, [], [], EpisodesSlice> = (set, get) => {
  const update = (fn: (s: EpisodesState) => Partial<EpisodesState> | null) =>
    set((store) => {
      const patch = fn(store.episodes);
      return patch ? { episodes: { ...store.episodes, ...patch } } : store;
    });
  return {
    episodes: initialEpisodesState,
    episodeFilterChanged: (patch) =>
      update((s) => ({
        filter: { ...s.filter, ...patch },
        generation: s.generation + 1,
        total: null,
        pages: {},
        pending: {},
        error: null,
      })),
    episodesRefreshed: () => update((s) => ({ generation: s.generation + 1, pending: {} })),
    episodePagesRequested: (generation, pageIndexes) =>
      update((s) => {
        if (generation !== s.generation || pageIndexes.length === 0) return null;
        const pending = { ...s.pending };
        for (const index of pageIndexes) pending[index] = generation;
        return { pending };
      }),
    episodePageLoaded: (generation, pageIndex, page) =>
      update((s) => {
        if (generation !== s.generation) return null;
        const { [pageIndex]: _done, ...pending } = s.pending;
        const pages = evictFarPages(
          { ...s.pages, [pageIndex]: { generation, rows: page.episodes } },
          pageIndex,
        );
        return { pages, pending, total: page.total, error: null };
      }),
    episodePageFailed: (generation, pageIndex, message) =>
      update((s) => {
        if (generation !== s.generation) return null;
        const { [pageIndex]: _failed, ...pending } = s.pending;
        return { pending, error: message };
      }),
    episodeSelected: (id) =>
      update((s) => (id === s.selectedId ? null : { selectedId: id, detail: null, detailError: null })),
    episodeDetailLoaded: (detail) =>
      update((s) => (detail.episode.id === s.selectedId ? { detail, detailError: null } : null)),
    episodeDetailFailed: (id, message) =>
      update((s) => (id === s.selectedId ? { detailError: message } : null)),
    episodeCompareOpened: (taskId, [a, b]) =>
      update((s) => ({
        compareRequests: s.compareRequests + 1,
        compare: {
          request: s.compareRequests + 1,
          taskId,
          error: null,
          sides: [{ status: 'idle', version: a }, { status: 'idle', version: b }],
        },
      })),
    episodeCompareStarted: (taskId, [a, b]) => {
      const request = get().episodes.compareRequests + 1;
      update(() => ({
        compareRequests: request,
        compare: { request, taskId, error: null, sides: [{ status: 'loading', version: a }, { status: 'loading', version: b }] },
      }));
      return request;
    },
    episodeCompareSideLoaded: (request, index, side) =>
      update((s) => {
        if (s.compare?.request !== request) return null;
        const sides: [CompareSide, CompareSide] = [...s.compare.sides];
        sides[index] = side;
        return { compare: { ...s.compare, sides } };
      }),
    episodeCompareFailed: (request, message) =>
      update((s) => (s.compare?.request === request ? { compare: { ...s.compare, error: message } } : null)),
    episodeCompareClosed: () => update((s) => (s.compare === null ? null : { compare: null })),
  };
};

/** Keeps at most MAX_CACHED_PAGES pages, dropping those farthest from `around`. */
export function evictFarPages(pages: Record<number, CachedPage>, around: number): Record<number, CachedPage> {
  const indexes = Object.keys(pages).map(Number);
  if (indexes.length <= MAX_CACHED_PAGES) return pages;
  const keep = indexes.sort((a, b) => Math.abs(a - around) - Math.abs(b - around)).slice(0, MAX_CACHED_PAGES);
  return Object.fromEntries(keep.map((index) => [index, pages[index]]));
}
