/** Fetches an episode's export and its run's merge totals into the timeline slice. */
import type { StoreApi } from 'zustand';
import type { EpisodeExport } from '../../../../swarm/common/timeline/export.ts';
import { queryString, type ApiRequest } from '../../api/client.ts';
import { ControlApiError, describeError } from '../../api/errors.ts';
import type { AppStore } from '../types.ts';
import type { EpisodeGroupShare, MergeTotals } from '../../../../swarm/common/api.ts';
import type { MergeMode } from './slice.ts';

/**
 * The merge view's document: the UI route's light export (calls without token arrays), or the full export on a
 * peer without the UI routes. Both carry the same timelines, decisions and savings.
 */
async function fetchMergeDocument(
  request: ApiRequest,
  episodeId: string,
  mode: MergeMode,
): Promise<EpisodeExport> {
  const id = encodeURIComponent(episodeId);
  try {
    return await request<EpisodeExport>('GET', `/ui/episodes/${id}/merge${queryString({ mode })}`);
  } catch (error) {
    // A 404 is either no UI routes on this peer or no such episode; the export route tells the two apart.
    if (!(error instanceof ControlApiError && error.status === 404)) throw error;
    return request<EpisodeExport>('GET', `/episodes/${id}/export${queryString({ mode })}`);
  }
}

export function loadTimeline(
  store: StoreApi<AppStore>,
  request: ApiRequest,
  episodeId: string,
  mode: MergeMode = 'merged',
): void {
  const requestId = store.getState().timelineRequested(episodeId, mode);
  fetchMergeDocument(request, episodeId, mode)
    .then((doc) => {
      store.getState().timelineLoaded(requestId, doc);
      loadRunSavings(store, request, doc.episode.model);
      loadGroupShare(store, request, episodeId);
    })
    .catch((error: unknown) => store.getState().timelineFailed(requestId, describeError(error)));
}

/** The run's totals (all episodes of the model); a peer without the UI routes answers 404, shown as "not available". */
function loadRunSavings(store: StoreApi<AppStore>, request: ApiRequest, model: string): void {
  request<MergeTotals>('GET', `/ui/savings${queryString({ model })}`)
    .then((savings) => store.getState().runSavingsLoaded(savings, null))
    .catch((error: unknown) => {
      const missing = error instanceof ControlApiError && error.status === 404;
      store
        .getState()
        .runSavingsLoaded(null, missing ? 'This peer does not report run totals yet.' : describeError(error));
    });
}

/** What the episode's GRPO group shares with it (tree training computes it once); 404 on a peer without the route. */
function loadGroupShare(store: StoreApi<AppStore>, request: ApiRequest, episodeId: string): void {
  request<EpisodeGroupShare>('GET', `/ui/episodes/${encodeURIComponent(episodeId)}/group`)
    .then((share) => store.getState().groupShareLoaded(episodeId, share, null))
    .catch((error: unknown) => {
      const missing = error instanceof ControlApiError && error.status === 404;
      store
        .getState()
        .groupShareLoaded(episodeId, null, missing ? 'This peer does not report group sharing yet.' : describeError(error));
    });
}
