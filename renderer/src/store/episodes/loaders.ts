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

/** Selects an episode and loads its calls (the conversation). */
export function openEpisode(store: StoreApi<AppStore>, request: ApiRequest, id: string): void {
  store.getState().episodeSelected(id);
  request<EpisodeDetail>('GET', `/episodes/${encodeURIComponent(id)}`)
    .then((detail) => store.getState().episodeDetailLoaded(detail))
    .catch((error: unknown) => store.getState().episodeDetailFailed(id, describeError(error)));
}
