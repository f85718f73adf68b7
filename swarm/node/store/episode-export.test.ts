/** The streamed export: every selected episode once, oldest first, read in bounded keyset chunks. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { EPISODE_EXPORT_FORMAT, episodeExportSchema } from '../../common/timeline/export.ts';
import { EXPORT_CHUNK_DEFAULT, exportEpisodes, type EpisodeExportOptions } from './episode-export.ts';
import type { EpisodeSelection } from './episode-list.ts';
import { insertEpisode, updateEpisodeState } from './episodes.ts';
import { storeEndedEpisode, tempStore } from './testing/episodes.ts';
import { recordTrainStep } from './train-steps.ts';

const EPISODES = 3_000;
const START = Date.UTC(2026, 0, 1);
const tokenizer = builtinTokenizerBundle().tokenizer;
let store: ReturnType<typeof tempStore>;

/** Episode i: model tiny unless i % 3 == 0, client c(i % 4), policy version i / 100, one second after i - 1; ended. */
beforeAll(() => {
  store = tempStore('episode-export');
  store.db.transaction(() => {
    for (let i = 0; i < EPISODES; i++) {
      const id = `ep-${String(i).padStart(5, '0')}`;
      insertEpisode(store.db, {
        id,
        model: i % 3 === 0 ? 'big' : 'tiny',
        taskId: `task-${i % 50}`,
        kind: i % 10 === 0 ? 'eval' : 'train',
        policyVersion: Math.floor(i / 100),
        client: `c${i % 4}`,
        createdAt: new Date(START + i * 1000).toISOString(),
      });
      updateEpisodeState(store.db, id, { state: i % 7 === 0 ? 'aborted' : 'ended', reward: (i % 5) / 4 });
    }
  })();
  // Two with calls and stored timelines; created in 2026-01-01's first seconds, so among the oldest.
  storeEndedEpisode(store.db, 'ep-full-01', 'tiny', 'full', 'c9');
  storeEndedEpisode(store.db, 'ep-full-02', 'tiny', 'full', 'c9');
});
afterAll(() => store.close());

function exported(selection: EpisodeSelection, options: EpisodeExportOptions = {}) {
  const chunks: number[] = [];
  const records = [...exportEpisodes(store.db, selection, () => tokenizer, { ...options, onChunk: (rows) => chunks.push(rows) })];
  return { ids: records.map((r) => r.episode.id), records, chunks };
}

describe('exportEpisodes', () => {
  it('exports every episode once, oldest first, in chunks no larger than the chunk size', () => {
    const { ids, records, chunks } = exported({});
    expect(ids).toHaveLength(EPISODES + 2);
    expect(new Set(ids).size).toBe(ids.length);
    const times = records.map((r) => r.episode.createdAt);
    expect([...times].sort()).toEqual(times);
    expect(Math.max(...chunks)).toBe(EXPORT_CHUNK_DEFAULT);
    expect(chunks.reduce((a, b) => a + b, 0)).toBe(EPISODES + 2);
    expect(chunks).toHaveLength(Math.ceil((EPISODES + 2) / EXPORT_CHUNK_DEFAULT));
    expect(episodeExportSchema.safeParse(records[0]).success).toBe(true);
    const full = records.find((r) => r.episode.id === 'ep-full-01');
    expect(full).toMatchObject({ format: EPISODE_EXPORT_FORMAT, mode: 'merged', savings: { naiveTokens: 16, mergedTokens: 9 } });
    expect(full?.calls).toHaveLength(2);
  });

  it('pages past ties in created_at by id', () => {
    for (const id of ['tie-b', 'tie-a', 'tie-c'])
      insertEpisode(store.db, { id, model: 'ties', taskId: 't', kind: 'train', policyVersion: 0, createdAt: '2027-01-01T00:00:00.000Z' });
    expect(exported({ model: 'ties' }, { chunkSize: 1 })).toMatchObject({ ids: ['tie-a', 'tie-b', 'tie-c'], chunks: [1, 1, 1, 0] });
  });

  it('selects by model, time window, policy version, client, state, kind, ids and train step', () => {
    const hour = (h: number) => new Date(START + h * 3_600_000).toISOString();
    // A training run's window: model tiny, [00:10:00, 00:20:00) = episodes 600…1199 of which two thirds are tiny.
    const window = exported({ model: 'tiny', createdFrom: hour(1 / 6), createdBefore: hour(1 / 3) }, { chunkSize: 50 });
    expect(window.ids).toHaveLength(400);
    expect(window.ids[0]).toBe('ep-00601');
    expect(window.ids.at(-1)).toBe('ep-01199');
    expect(Math.max(...window.chunks)).toBe(50);

    const version = exported({ policyVersion: 7, client: 'c1', state: 'ended', kind: 'train' });
    expect(version.records.every((r) => r.episode.policyVersion === 7 && r.episode.client === 'c1')).toBe(true);
    expect(version.records.every((r) => r.episode.state === 'ended' && r.episode.kind === 'train')).toBe(true);
    expect(version.ids).toHaveLength(
      Array.from({ length: 100 }, (_, k) => 700 + k).filter((i) => i % 4 === 1 && i % 7 !== 0 && i % 10 !== 0).length,
    );

    expect(exported({ episodeIds: ['ep-02999', 'ep-00000', 'missing'] }).ids).toEqual(['ep-00000', 'ep-02999']);
    expect(exported({ episodeIds: [] }).ids).toEqual([]);

    recordTrainStep(store.db, { model: 'tiny', step: 3, policyVersion: 4, metrics: {}, createdAt: hour(2) }, ['ep-00010', 'ep-00004']);
    expect(exported({ trainStep: { model: 'tiny', step: 3 } }).ids).toEqual(['ep-00004', 'ep-00010']);
  });

  it('reads nothing until asked, and stops reading when the consumer stops', () => {
    const chunks: number[] = [];
    const records = exportEpisodes(store.db, {}, () => tokenizer, { chunkSize: 100, onChunk: (rows) => chunks.push(rows) });
    expect(chunks).toEqual([]);
    let taken = 0;
    for (const _ of records) if (++taken === 150) break;
    expect(chunks).toEqual([100, 100]);
  });

  it('refuses a chunk size out of bounds and a time that is not one', () => {
    const run = (selection: EpisodeSelection, options: EpisodeExportOptions) => () =>
      exportEpisodes(store.db, selection, () => tokenizer, options).next();
    expect(run({}, { chunkSize: 0 })).toThrow(expect.objectContaining({ name: 'EpisodeQueryError' }));
    expect(run({}, { chunkSize: 1e9 })).toThrow(expect.objectContaining({ name: 'EpisodeQueryError' }));
    expect(run({ createdBefore: 'soon' }, {})).toThrow(expect.objectContaining({ name: 'EpisodeQueryError' }));
  });
});
