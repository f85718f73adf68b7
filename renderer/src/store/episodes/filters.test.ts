import { describe, expect, it } from 'vitest';
import type { ApiRequest } from '../../api/client.ts';
import { createAppStore } from '../index.ts';
import { compareVersions } from './loaders.ts';
import { episodesSelectors } from './selectors.ts';
import { EPISODE_PAGE_SIZE, emptyEpisodeFilter } from './slice.ts';
import type { EpisodeDetail, EpisodeListItem, EpisodePage } from './types.ts';

describe('episode list filters and sort in the API query', () => {
  it('sends client, policy version and a non-default sort; leaves the default order out', () => {
    const filter = { ...emptyEpisodeFilter, client: 'calc-agent', policyVersion: '3', kind: 'eval' as const, state: 'ended' as const };
    expect(episodesSelectors.pagePath(filter, 1)).toBe(
      `/episodes?kind=eval&state=ended&client=calc-agent&policyVersion=3&limit=${EPISODE_PAGE_SIZE}&offset=${EPISODE_PAGE_SIZE}`,
    );
    expect(episodesSelectors.pagePath({ ...emptyEpisodeFilter, sort: 'reward-desc', query: 'x' }, 0)).toBe(
      `/ui/episodes?q=x&sort=reward-desc&limit=${EPISODE_PAGE_SIZE}&offset=0`,
    );
    expect(episodesSelectors.isFiltered({ ...emptyEpisodeFilter, policyVersion: '0' })).toBe(true);
    expect(episodesSelectors.isFiltered({ ...emptyEpisodeFilter, sort: 'reward-asc' })).toBe(false);
  });

  it('cycles the Reward header: highest first, lowest first, time order', () => {
    const order = ['newest'] as Parameters<typeof episodesSelectors.nextRewardSort>[0][];
    for (let i = 0; i < 3; i++) order.push(episodesSelectors.nextRewardSort(order[i]));
    expect(order).toEqual(['newest', 'reward-desc', 'reward-asc', 'newest']);
    expect(episodesSelectors.nextRewardSort('oldest')).toBe('reward-desc');
  });

  it('a sort change is a filter change: a new generation, the pages dropped', () => {
    const store = createAppStore();
    const before = store.getState().episodes.generation;
    store.getState().episodeFilterChanged({ sort: 'reward-desc' });
    expect(store.getState().episodes).toMatchObject({ generation: before + 1, total: null, pages: {} });
  });
});

describe('compare versions', () => {
  const row = (id: string, policyVersion: number) => ({ id, policyVersion }) as EpisodeListItem;
  const detail = (id: string, policyVersion: number, reward: number): EpisodeDetail => ({
    episode: { ...row(id, policyVersion), reward, state: 'trained' } as EpisodeDetail['episode'],
    calls: [],
  });

  it('loads the task’s latest finished episode at each version, side by side', async () => {
    const asked: string[] = [];
    const request = (async (_method: string, path: string) => {
      asked.push(path);
      if (path.includes('policyVersion=1&')) return { episodes: [row('ep-a', 1)], total: 4 } satisfies EpisodePage;
      if (path.includes('policyVersion=7&')) return { episodes: [], total: 0 } satisfies EpisodePage;
      if (path === '/episodes/ep-a') return detail('ep-a', 1, 0.5);
      throw new Error(`unexpected ${path}`);
    }) as ApiRequest;
    const store = createAppStore();
    await compareVersions(store, request, 'task 1', [1, 7]);
    expect(asked[0]).toBe('/episodes?taskId=task+1&policyVersion=1&state=ended%2Ctrained%2Cdiscarded&limit=1');
    const compare = store.getState().episodes.compare;
    expect(compare?.error).toBeNull();
    expect(compare?.sides[0]).toMatchObject({ status: 'loaded', version: 1, detail: { episode: { id: 'ep-a', reward: 0.5 } } });
    expect(compare?.sides[1]).toEqual({ status: 'none', version: 7 });
  });

  it('shows a failure, and drops answers to a comparison replaced by a newer one', async () => {
    const store = createAppStore();
    const waiting: (() => void)[] = [];
    const slow = (() => new Promise((resolve) => waiting.push(() => resolve({ episodes: [], total: 0 } as never)))) as ApiRequest;
    const first = compareVersions(store, slow, 't', [1, 2]);
    await compareVersions(store, (async () => Promise.reject(Object.assign(new Error('boom'), { name: 'NotFoundError' }))) as ApiRequest, 't', [3, 4]);
    for (const release of waiting) release();
    await first;
    const compare = store.getState().episodes.compare;
    expect(compare?.sides.map((s) => s.version)).toEqual([3, 4]);
    expect(compare?.sides.every((s) => s.status === 'loading')).toBe(true);
    expect(compare?.error).toBeTruthy();
    store.getState().episodeCompareClosed();
    expect(store.getState().episodes.compare).toBeNull();
  });
});
