/** The read model of one episode: light calls, the export in both modes, token texts for unknown ids. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getCalls, getEpisodeExport, tokenTextOf } from './episode-reads.ts';
import { insertCall, insertEpisode } from './episodes.ts';
import { callRecord, storeEndedEpisode, tempStore } from './testing/episodes.ts';

let store: ReturnType<typeof tempStore>;
beforeEach(() => {
  store = tempStore('episode-reads');
});
afterEach(() => store.close());

const spelled = { idToToken: (id: number) => `t${id}` };
const bodiless = { messages: [], tools: null, promptIds: [], generatedIds: [], logprobs: [] };

describe('light calls', () => {
  it('are the calls without messages, tools and token arrays', () => {
    storeEndedEpisode(store.db, 'ep-01', 'tiny', 't', 'c');
    const full = getCalls(store.db, 'ep-01');
    expect(full.map((c) => [c.messages.length, c.tools?.length, c.promptIds.length])).toEqual([
      [1, 1, 5],
      [1, 1, 7],
    ]);
    expect(getCalls(store.db, 'ep-01', { light: true })).toEqual(full.map((c) => ({ ...c, ...bodiless })));
  });
});

describe('the export', () => {
  it('with light calls keeps the timelines, decisions and savings, from the store and merged anew', () => {
    storeEndedEpisode(store.db, 'ep-01', 'tiny', 't', 'c');
    for (const mode of ['merged', 'naive'] as const) {
      const { calls, ...full } = getEpisodeExport(store.db, 'ep-01', spelled, mode);
      const { calls: light, ...rest } = getEpisodeExport(store.db, 'ep-01', spelled, mode, { lightCalls: true });
      expect(rest).toEqual(full);
      expect(light).toEqual(calls.map((c) => ({ ...c, ...bodiless, promptTokenTexts: [], generatedTokenTexts: [] })));
    }
    const doc = getEpisodeExport(store.db, 'ep-01', spelled, 'merged', { lightCalls: true });
    expect(doc.timelines.map((t) => t.tokens)).toEqual([[1, 2, 3, 4, 5, 6, 7, 8, 9]]);
    expect(doc.timelines[0].tokenTexts[0]).toBe('t1');
    expect(doc.decisions.map((d) => d.action)).toEqual(['started', 'joined']);
    const naive = getEpisodeExport(store.db, 'ep-01', spelled, 'naive', { lightCalls: true });
    expect(naive.timelines.map((t) => t.tokens.length)).toEqual([7, 9]);
    expect(naive.savings.mergedTokens).toBe(16);
  });

  it('of an active episode merges its stored calls', () => {
    insertEpisode(store.db, { id: 'ep-live', model: 'tiny', taskId: 't', kind: 'train', policyVersion: 1 });
    insertCall(store.db, 'ep-live', callRecord({ callId: 'a', promptIds: [1], generatedIds: [2], generatedLogprobs: [-1], policyVersion: 1 }, 0));
    const doc = getEpisodeExport(store.db, 'ep-live', spelled, 'merged', { lightCalls: true });
    expect(doc.timelines.map((t) => t.tokens)).toEqual([[1, 2]]);
    expect(doc.calls[0].promptIds).toEqual([]);
  });

  it('of an unknown episode is EpisodeNotFoundError', () => {
    expect(() => getEpisodeExport(store.db, 'nope', spelled)).toThrow(expect.objectContaining({ name: 'EpisodeNotFoundError' }));
  });
});

describe('tokenTextOf', () => {
  it('spells ids the tokenizer does not know as <id>', () => {
    const text = tokenTextOf({
      idToToken: (id) => {
        if (id > 9) throw new RangeError(`no token ${id}`);
        return `t${id}`;
      },
    });
    expect([text(3), text(12)]).toEqual(['t3', '<12>']);
  });
});
