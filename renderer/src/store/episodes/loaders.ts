/** Fetches what the episode list needs and hands it to the store's actions (outside React, like api/connection.ts). */
import type { StoreApi } from 'zustand';
import type { AppStore } from '../types.ts';
import type { ApiRequest } from '../../api/client.ts';
import { describeError } from '../../api/errors.ts';
import { episodesSelectors } from './selectors.ts';
import type { EpisodeDetail, EpisodePage } from './types.ts';

/** Requests the pages that rows [first, last] need and are not cached or in flight. */
export function loadVisibleEpisodes(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  first: number,
  last: number,
): void {
  const { episodes } = store.getState();
  const pages = episodesSelectors.pagesToLoad(episodes, first, last);
  if (pages.length === 0) return;
  const { generation, filter } = episodes;
  store.getState().episodePagesRequested(generation, pages);
  for (const pageIndex of pages) {
    request<EpisodePage>('GET', episodesSelectors.pagePath(filter, pageIndex))
      .then((page) => store.getState().episodePageLoaded(generation, pageIndex, page))
      .catch((error: unknown) =>
        store.getState().episodePageFailed(generation, pageIndex, describeError(error)),
      );
  }
}

/**
 * "Compare versions": finds the task's latest finished episode at each version and loads both (messages, reward,
 * state). A version without one shows as such; a failed request shows its error.
 */
export function compareVersions(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  taskId: string,
  versions: readonly [number, number],
): Promise<void> {
  const compare = store.getState().episodeCompareStarted(taskId, versions);
  const loadSide = async (index: 0 | 1) => {
    const version = versions[index];
    const page = await request<EpisodePage>('GET', episodesSelectors.comparePath(taskId, version));
    const found = page.episodes[0];
    if (!found) return store.getState().episodeCompareSideLoaded(compare, index, { status: 'none', version });
    const detail = await request<EpisodeDetail>('GET', `/episodes/${encodeURIComponent(found.id)}`);
    store.getState().episodeCompareSideLoaded(compare, index, { status: 'loaded', version, detail });
  };
  return Promise.all([loadSide(0), loadSide(1)])
    .then(() => undefined)
    .catch((error: unknown) => store.getState().episodeCompareFailed(compare, describeError(error)));
}

/** Selects an episode and loads its calls (the conversation). */
export function openEpisode(store: StoreApi<AppStore>, request: ApiRequest, id: string): void {
  store.getState().episodeSelected(id);
  request<EpisodeDetail>('GET', `/episodes/${encodeURIComponent(id)}`)
    .then((detail) => store.getState().episodeDetailLoaded(detail))
    .catch((error: unknown) => store.getState().episodeDetailFailed(id, describeError(error)));
}
