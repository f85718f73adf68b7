import type { Database } from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mergeTimelines, type MergeCall, type MergeMode } from '../../common/timeline/merge.ts';
import { getTimelines } from './episode-reads.ts';
import { endEpisode, insertEpisode } from './episodes.ts';
import { callRecord, tempStore } from './testing/episodes.ts';
import { getTrainingTimelines } from './timelines.ts';

let store: ReturnType<typeof tempStore>;
let db: Database;

beforeEach(() => {
  store = tempStore('training-timelines');
  db = store.db;
});

afterEach(() => store.close());

/** Two calls, the second extending the first: naive 5+2+7+2 = 16 tokens; merged one timeline of 9. */
const CALLS: MergeCall[] = [
  {
    callId: 'c0',
    promptIds: [1, 2, 3, 4, 5],
    generatedIds: [6, 7],
    generatedLogprobs: [-0.5, -0.25],
    policyVersion: 1,
  },
  {
    callId: 'c1',
    promptIds: [1, 2, 3, 4, 5, 6, 7],
    generatedIds: [8, 9],
    generatedLogprobs: [-0.125, -1],
    policyVersion: 1,
  },
];

function storeEpisode(id: string, mode: MergeMode, success?: boolean): void {
  insertEpisode(db, { id, model: 'm', taskId: 't', kind: 'train', policyVersion: 1 });
  endEpisode(db, id, { reward: 1, success, calls: CALLS.map(callRecord), merge: mergeTimelines(CALLS, mode) });
}

describe('getTrainingTimelines', () => {
  it.each(['merged', 'naive'] as const)(
    'reads the %s timelines stored at end, the naive token count and success',
    (mode) => {
      storeEpisode('ep1', mode, true);
      const read = getTrainingTimelines(db, 'ep1')!;
      const stored = getTimelines(db, 'ep1')!;
      expect(read.mode).toBe(mode);
      expect(read.timelines).toEqual(
        stored.timelines.map((t) => ({
          timelineId: t.timelineId,
          tokens: t.tokens,
          lossMask: t.lossMask,
          logprobs: t.logprobs,
        })),
      );
      expect(read.timelines).toHaveLength(mode === 'merged' ? 1 : 2);
      expect(read.naiveTokens).toBe(16);
      expect(read.success).toBe(true);
    },
  );

  it('says null for success the episode did not report, and for an episode that has not ended', () => {
    storeEpisode('ep1', 'merged');
    expect(getTrainingTimelines(db, 'ep1')!.success).toBeNull();
    insertEpisode(db, { id: 'ep2', model: 'm', taskId: 't', kind: 'train', policyVersion: 1 });
    expect(getTrainingTimelines(db, 'ep2')).toBeNull();
  });

  it('refuses an unknown episode by name', () => {
    expect(() => getTrainingTimelines(db, 'nope')).toThrow(
      expect.objectContaining({ name: 'EpisodeNotFoundError' }),
    );
  });
});
