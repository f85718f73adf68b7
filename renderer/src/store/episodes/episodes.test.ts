import { describe, expect, it } from 'vitest';
import type { CallRecord } from '../../../../swarm/common/timeline/call.ts';
import { createAppStore } from '../index.ts';
import { createControlApiClient, queryString } from '../../api/client.ts';
import { episodesSelectors } from './selectors.ts';
import { EPISODE_PAGE_SIZE, MAX_CACHED_PAGES, emptyEpisodeFilter } from './slice.ts';
import type { EpisodeListItem, EpisodePage } from './types.ts';

function item(i: number): EpisodeListItem {
  return {
    id: `ep-${i}`,
    model: 'tiny',
    taskId: `task-${i % 7}`,
    groupId: `task-${i % 7}`,
    kind: 'train',
    state: 'ended',
    reward: i % 2,
    success: null,
    metrics: null,
    abortReason: null,
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
    endedAt: null,
    client: 'echo',
    scriptHash: 'abc',
    policyVersion: 1,
    calls: 3,
    savings: null,
  };
}

function page(index: number, total: number): EpisodePage {
  const start = index * EPISODE_PAGE_SIZE;
  const rows = Array.from({ length: Math.max(0, Math.min(EPISODE_PAGE_SIZE, total - start)) }, (_, i) =>
    item(start + i),
  );
  return { episodes: rows, total };
}

describe('episodes slice: a paged window over 100,000 episodes', () => {
  it('asks for page 0 first, then only the pages that cover the visible rows', () => {
    const store = createAppStore();
    const s = () => store.getState().episodes;
    expect(episodesSelectors.pagesToLoad(s(), 0, 30)).toEqual([0]);
    store.getState().episodePagesRequested(s().generation, [0]);
    expect(episodesSelectors.pagesToLoad(s(), 0, 30)).toEqual([]); // in flight
    store.getState().episodePageLoaded(s().generation, 0, page(0, 100_000));
    expect(episodesSelectors.rowCount(s())).toBe(100_000);
    expect(episodesSelectors.rowAt(s(), 5)?.id).toBe('ep-5');
    // Jump to the end of the list: only the last page is needed.
    expect(episodesSelectors.pagesToLoad(s(), 99_980, 100_020)).toEqual([999]);
    expect(episodesSelectors.rowAt(s(), 99_990)).toBeUndefined();
  });

  it('keeps a bounded number of pages, dropping the farthest', () => {
    const store = createAppStore();
    const generation = store.getState().episodes.generation;
    for (let p = 0; p < MAX_CACHED_PAGES + 10; p++)
      store.getState().episodePageLoaded(generation, p, page(p, 100_000));
    const pages = Object.keys(store.getState().episodes.pages).map(Number);
    expect(pages).toHaveLength(MAX_CACHED_PAGES);
    expect(pages).not.toContain(0);
    expect(pages).toContain(MAX_CACHED_PAGES + 9);
  });

  it('drops answers to requests made before the filter changed', () => {
    const store = createAppStore();
    const old = store.getState().episodes.generation;
    store.getState().episodeFilterChanged({ state: 'aborted' });
    store.getState().episodePageLoaded(old, 0, page(0, 500));
    expect(store.getState().episodes.total).toBeNull();
    expect(episodesSelectors.pagePath(store.getState().episodes.filter, 2)).toBe(
      `/episodes?state=aborted&limit=${EPISODE_PAGE_SIZE}&offset=${2 * EPISODE_PAGE_SIZE}`,
    );
  });

  it('an empty list asks again for page 0 after a refresh (episodes may have arrived)', () => {
    const store = createAppStore();
    store.getState().episodePageLoaded(0, 0, { episodes: [], total: 0 });
    expect(episodesSelectors.pagesToLoad(store.getState().episodes, 0, 0)).toEqual([]);
    store.getState().episodesRefreshed();
    expect(episodesSelectors.pagesToLoad(store.getState().episodes, 0, 0)).toEqual([0]);
  });

  it('a refresh keeps the rows on screen but marks them for refetching', () => {
    const store = createAppStore();
    const generation = store.getState().episodes.generation;
    store.getState().episodePageLoaded(generation, 0, page(0, 300));
    store.getState().episodesRefreshed();
    const s = store.getState().episodes;
    expect(episodesSelectors.rowAt(s, 1)?.id).toBe('ep-1');
    expect(episodesSelectors.pagesToLoad(s, 0, 40)).toEqual([0]);
  });

  it('sends free text to the search route and everything else to the plain list', () => {
    const filter = { ...emptyEpisodeFilter, model: 'tiny', query: ' calc ' };
    expect(episodesSelectors.pagePath(filter, 0)).toBe(
      `/ui/episodes?q=calc&model=tiny&limit=${EPISODE_PAGE_SIZE}&offset=0`,
    );
    expect(episodesSelectors.isFiltered(filter)).toBe(true);
    expect(queryString({ a: undefined, b: '', c: 0 })).toBe('?c=0');
  });
});

describe('conversations', () => {
  const call = (index: number, agentKey: string, history: string[]): CallRecord => ({
    callId: `c${index}`,
    index,
    agentKey,
    messages: history.map((content, i) => ({ role: i % 2 ? 'assistant' : 'user', content })),
    tools: null,
    promptIds: [],
    generatedIds: [],
    logprobs: [],
    assistantMessage: {
      role: 'assistant',
      content: `answer ${index}`,
      tool_calls: [{ id: 't1', type: 'function', function: { name: 'calc', arguments: '{"x":1}' } }],
    },
    finishReason: 'tool_calls',
    policyVersion: 1,
    timings: { startedAt: '', firstTokenAt: null, endedAt: '' },
    splice: { assistantTurns: 0, splicedTurns: 0, driftPreventedTurns: 0, turns: [] },
  });

  it('shows each agent its last prompt and the answer it got, agents in order of first call', () => {
    const result = episodesSelectors.conversations([
      call(0, 'a', ['q']),
      call(1, 'b', ['other']),
      call(2, 'a', ['q', 'x', 'y']),
    ]);
    expect(result.map((c) => c.agentKey)).toEqual(['a', 'b']);
    expect(result[0].calls).toBe(2);
    expect(result[0].messages.map((m) => m.content)).toEqual(['q', 'x', 'y', 'answer 2']);
    expect(result[0].messages[3].tool_calls?.[0].function.name).toBe('calc');
  });
});

describe('control API client', () => {
  it('sends the bearer token and JSON, and rebuilds server errors by name', async () => {
    const seen: { url: string; init: RequestInit }[] = [];
    const { request } = createControlApiClient({
      apiUrl: 'http://peer/api/',
      token: 'tok',
      fetch: async (url, init) => {
        seen.push({ url: String(url), init: init ?? {} });
        return new Response(JSON.stringify({ error: { name: 'NotFoundError', message: 'no episode x' } }), {
          status: 404,
        });
      },
    });
    await expect(request('POST', '/clients/x/pause', { a: 1 })).rejects.toMatchObject({
      name: 'NotFoundError',
      status: 404,
    });
    expect(seen[0].url).toBe('http://peer/api/clients/x/pause');
    expect((seen[0].init.headers as Record<string, string>).Authorization).toBe('Bearer tok');
    expect(seen[0].init.body).toBe('{"a":1}');
  });
});
