/**
 * The first page of the runs list, fetched once the app is live, so the Runs view paints its rows the moment it
 * opens (the peer answers that page in a few hundred ms when its runs hold long histories). The view itself loads
 * the whole list when it opens; `run` events keep it current from then on.
 */
import { useEffect } from 'react';
import { apiRequest } from '../../api/page-client.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { prefetchRunsFirstPage } from '../../store/runs/loaders.ts';

export function usePrefetchRuns(): void {
  const live = useAppStore((s) => s.connection.phase === 'live');
  useEffect(() => {
    if (live && appStore.getState().runs.total === null) void prefetchRunsFirstPage(appStore, apiRequest());
  }, [live]);
}
