/** Episode pages with filters and text search, and the run's merge savings, on a real SQLite file. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EPISODE_PAGE_MAX, listEpisodes, sumRunSavings } from './episode-list.ts';
import { abortEpisode, insertEpisode, updateEpisodeState } from './episodes.ts';
import { recordTrainStep } from './train-steps.ts';
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

describe('filters and order', () => {
  /** ep-00…ep-09: clients a/b alternate, policy versions 0-2, one second apart; rewards vary, two have none. */
  function seedTen() {
    const rewards = [0.5, null, 1, 0, 0.5, 1, null, 0.25, 0, 0.75];
    rewards.forEach((reward, i) => {
      const id = `ep-0${i}`;
      insertEpisode(store.db, {
        id,
        model: 'tiny',
        taskId: `t${i % 3}`,
        kind: i % 4 === 0 ? 'eval' : 'train',
        policyVersion: Math.floor(i / 4),
        client: i % 2 === 0 ? 'a' : 'b',
        createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
      });
      if (reward !== null) updateEpisodeState(store.db, id, { state: 'ended', reward });
    });
  }

  it('selects by client, policy version and a time window [from, before)', () => {
    seedTen();
    expect(ids({ client: 'a', sort: 'oldest' })).toEqual(['ep-00', 'ep-02', 'ep-04', 'ep-06', 'ep-08']);
    expect(ids({ policyVersion: 1, sort: 'oldest' })).toEqual(['ep-04', 'ep-05', 'ep-06', 'ep-07']);
    expect(ids({ policyVersion: 1, client: 'b', kind: 'train' })).toEqual(['ep-07', 'ep-05']);
    // Bounds written with an offset or without milliseconds compare as the times they are.
    expect(ids({ createdFrom: '2026-01-01T00:00:02Z', createdBefore: '2026-01-01T01:00:05+01:00', sort: 'oldest' })).toEqual([
      'ep-02',
      'ep-03',
      'ep-04',
    ]);
    expect(listEpisodes(store.db, { createdFrom: '2026-01-02' }).total).toBe(0);
    expect(() => listEpisodes(store.db, { createdFrom: 'yesterday' })).toThrow(expect.objectContaining({ name: 'EpisodeQueryError' }));
  });

  it('selects listed ids, several states, and the episodes of a train step', () => {
    seedTen();
    expect(ids({ episodeIds: ['ep-03', 'ep-01', 'nope'] })).toEqual(['ep-03', 'ep-01']);
    expect(ids({ episodeIds: [] })).toEqual([]);
    expect(listEpisodes(store.db, { state: ['active', 'ended'] }).total).toBe(10);
    expect(listEpisodes(store.db, { state: [] }).total).toBe(0);
    recordTrainStep(store.db, { model: 'tiny', step: 1, policyVersion: 1, metrics: {}, createdAt: '2026-01-02T00:00:00.000Z' }, ['ep-02', 'ep-05']);
    expect(ids({ trainStep: { model: 'tiny', step: 1 } })).toEqual(['ep-05', 'ep-02']);
    expect(ids({ trainStep: { model: 'tiny', step: 2 } })).toEqual([]);
  });

  it('sorts by reward either way with unrewarded episodes last, each way the reverse of the other, pages without overlap', () => {
    seedTen();
    const desc = ids({ sort: 'reward-desc', limit: 10 });
    expect(desc).toEqual(['ep-05', 'ep-02', 'ep-09', 'ep-04', 'ep-00', 'ep-07', 'ep-08', 'ep-03', 'ep-06', 'ep-01']);
    expect(ids({ sort: 'reward-asc', limit: 10 })).toEqual(['ep-03', 'ep-08', 'ep-07', 'ep-00', 'ep-04', 'ep-09', 'ep-02', 'ep-05', 'ep-01', 'ep-06']);
    const paged = [0, 3, 6, 9].flatMap((offset) => ids({ sort: 'reward-desc', limit: 3, offset }));
    expect(paged).toEqual(desc);
    expect(ids({ sort: 'oldest', limit: 2 })).toEqual(['ep-00', 'ep-01']);
    expect(ids({ limit: 2 })).toEqual(['ep-09', 'ep-08']);
    expect(() => listEpisodes(store.db, { sort: 'sideways' as never })).toThrow(expect.objectContaining({ name: 'EpisodeQueryError' }));
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
