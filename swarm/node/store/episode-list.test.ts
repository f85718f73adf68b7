/** Episode pages with filters and text search, and the run's merge savings, on a real SQLite file. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EPISODE_PAGE_MAX, listEpisodes, sumRunSavings } from './episode-list.ts';
import { abortEpisode, insertEpisode } from './episodes.ts';
import { storeEndedEpisode, tempStore } from './testing/episodes.ts';

let store: ReturnType<typeof tempStore>;
beforeEach(() => {
  store = tempStore('episode-list');
});
afterEach(() => store.close());

const ids = (filter: Parameters<typeof listEpisodes>[1]) => listEpisodes(store.db, filter).episodes.map((e) => e.id);

describe('text search in the episode list', () => {
  it('matches id, task, model and client text, case-insensitively, with the other filters and paging', () => {
    storeEndedEpisode(store.db, 'ep-01', 'tiny', 'arith-7', 'calc-agent');
    storeEndedEpisode(store.db, 'ep-02', 'tiny', 'spell-1', 'echo');
    storeEndedEpisode(store.db, 'ep-03', 'big', 'arith-9', 'echo');
    const arith = listEpisodes(store.db, { text: 'ARITH' });
    expect(arith.total).toBe(2);
    expect(arith.episodes.map((e) => e.id)).toEqual(['ep-03', 'ep-01']);
    expect(arith.episodes[0]).toMatchObject({ model: 'big', state: 'ended', calls: 2, savings: { naiveTokens: 16, mergedTokens: 9 } });
    expect(ids({ text: 'echo', model: 'tiny' })).toEqual(['ep-02']);
    expect(ids({ text: 'calc-agent' })).toEqual(['ep-01']);
    expect(listEpisodes(store.db, { text: 'ep-0', limit: 1, offset: 1 })).toMatchObject({ total: 3, episodes: [{ id: 'ep-02' }] });
  });

  it('matches an abort reason', () => {
    insertEpisode(store.db, { id: 'ep-01', model: 'tiny', taskId: 't', kind: 'train', policyVersion: 1 });
    insertEpisode(store.db, { id: 'ep-02', model: 'tiny', taskId: 't', kind: 'train', policyVersion: 1 });
    abortEpisode(store.db, 'ep-01', 'script crashed');
    expect(ids({ text: 'CRASH' })).toEqual(['ep-01']);
  });

  it('treats % and _ in the text literally', () => {
    storeEndedEpisode(store.db, 'ep-04', 'tiny', 'a_b', 'x');
    storeEndedEpisode(store.db, 'ep-05', 'tiny', 'axb', 'x');
    expect(ids({ text: 'a_b' })).toEqual(['ep-04']);
    expect(listEpisodes(store.db, { text: '%' }).total).toBe(0);
  });

  it('bounds the page size', () => {
    expect(() => listEpisodes(store.db, { limit: EPISODE_PAGE_MAX + 1 })).toThrow(
      expect.objectContaining({ name: 'EpisodeQueryError' }),
    );
    expect(listEpisodes(store.db, { limit: EPISODE_PAGE_MAX }).total).toBe(0);
  });
});

describe('run savings', () => {
  it('sums the merge savings of a model’s ended episodes', () => {
    storeEndedEpisode(store.db, 'ep-01', 'tiny', 't', 'c');
    storeEndedEpisode(store.db, 'ep-02', 'tiny', 't', 'c');
    storeEndedEpisode(store.db, 'ep-03', 'big', 't', 'c');
    insertEpisode(store.db, { id: 'ep-04', model: 'tiny', taskId: 't', kind: 'train', policyVersion: 1 }); // active: not counted
    expect(sumRunSavings(store.db, 'tiny')).toEqual({
      model: 'tiny',
      episodes: 2,
      calls: 4,
      naiveTokens: 32,
      mergedTokens: 18,
      savedTokens: 14,
      tokenRatio: 32 / 18,
    });
    expect(sumRunSavings(store.db, undefined).episodes).toBe(3);
    expect(sumRunSavings(store.db, 'none')).toMatchObject({ episodes: 0, naiveTokens: 0, tokenRatio: 1 });
  });
});
