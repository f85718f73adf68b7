import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CallRecord } from '../../common/timeline/call.ts';
import { mergeTimelines, type MergeCall } from '../../common/timeline/merge.ts';
import { openStore } from '../store/db.ts';
import { endEpisode, insertEpisode } from '../store/episodes.ts';
import { mergeViewDocument, runSavings, searchEpisodes } from './ui-routes.ts';

let dir: string;
let db: Database;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-ui-routes-'));
  db = openStore(join(dir, 'store.sqlite'));
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An ended two-call episode whose second call extends the first: naive 5+2+7+2 = 16 tokens, merged 9. */
function endedEpisode(id: string, model: string, taskId: string, client: string) {
  insertEpisode(db, {
    id,
    model,
    taskId,
    kind: 'train',
    policyVersion: 1,
    client,
    createdAt: `2026-01-01T00:00:${id.slice(-2)}Z`,
  });
  const calls = [
    {
      callId: `${id}-a`,
      promptIds: [1, 2, 3, 4, 5],
      generatedIds: [6, 7],
      generatedLogprobs: [-0.1, -0.2],
      policyVersion: 1,
    },
    {
      callId: `${id}-b`,
      promptIds: [1, 2, 3, 4, 5, 6, 7],
      generatedIds: [8, 9],
      generatedLogprobs: [-0.1, -0.2],
      policyVersion: 1,
    },
  ];
  endEpisode(db, id, {
    reward: 1,
    calls: calls.map((c, index) => callRecord(c, index)),
    merge: mergeTimelines(calls, 'merged'),
  });
}

function callRecord(call: MergeCall, index: number): CallRecord {
  const time = '2026-01-01T00:00:00Z';
  return {
    callId: call.callId,
    index,
    agentKey: 'agent',
    messages: [{ role: 'user', content: 'hello' }],
    tools: null,
    promptIds: [...call.promptIds],
    generatedIds: [...call.generatedIds],
    logprobs: [...call.generatedLogprobs],
    assistantMessage: { role: 'assistant', content: 'hi' },
    finishReason: 'stop',
    policyVersion: 1,
    timings: { startedAt: time, firstTokenAt: null, endedAt: time },
    splice: { assistantTurns: 0, splicedTurns: 0, driftPreventedTurns: 0, turns: [] },
  };
}

describe('UI search over episodes', () => {
  it('matches id, task, model and client text, case-insensitively, with the list page shape', () => {
    endedEpisode('ep-01', 'tiny', 'arith-7', 'calc-agent');
    endedEpisode('ep-02', 'tiny', 'spell-1', 'echo');
    endedEpisode('ep-03', 'big', 'arith-9', 'echo');
    const arith = searchEpisodes(db, { q: 'ARITH', limit: 50, offset: 0 });
    expect(arith.total).toBe(2);
    expect(arith.episodes.map((e) => e.id)).toEqual(['ep-03', 'ep-01']);
    expect(arith.episodes[0]).toMatchObject({
      model: 'big',
      state: 'ended',
      calls: 2,
      savings: { naiveTokens: 16, mergedTokens: 9 },
    });
    expect(
      searchEpisodes(db, { q: 'echo', model: 'tiny', limit: 50, offset: 0 }).episodes.map((e) => e.id),
    ).toEqual(['ep-02']);
    expect(searchEpisodes(db, { q: 'ep-0', limit: 1, offset: 1 })).toMatchObject({
      total: 3,
      episodes: [{ id: 'ep-02' }],
    });
  });

  it('treats % and _ in the text literally', () => {
    endedEpisode('ep-04', 'tiny', 'a_b', 'x');
    endedEpisode('ep-05', 'tiny', 'axb', 'x');
    expect(searchEpisodes(db, { q: 'a_b', limit: 50, offset: 0 }).episodes.map((e) => e.id)).toEqual([
      'ep-04',
    ]);
    expect(searchEpisodes(db, { q: '%', limit: 50, offset: 0 }).total).toBe(0);
  });
});

describe('run savings', () => {
  it('sums the merge savings of a model’s ended episodes', () => {
    endedEpisode('ep-01', 'tiny', 't', 'c');
    endedEpisode('ep-02', 'tiny', 't', 'c');
    endedEpisode('ep-03', 'big', 't', 'c');
    insertEpisode(db, { id: 'ep-04', model: 'tiny', taskId: 't', kind: 'train', policyVersion: 1 }); // active: not counted
    expect(runSavings(db, 'tiny')).toEqual({
      model: 'tiny',
      episodes: 2,
      calls: 4,
      naiveTokens: 32,
      mergedTokens: 18,
      savedTokens: 14,
      tokenRatio: 32 / 18,
    });
    expect(runSavings(db, undefined).episodes).toBe(3);
    expect(runSavings(db, 'none')).toMatchObject({ episodes: 0, naiveTokens: 0, tokenRatio: 1 });
  });
});

describe('merge view document', () => {
  it('has the export’s timelines, decisions and savings, and calls without token arrays', () => {
    endedEpisode('ep-01', 'tiny', 't', 'c');
    const doc = mergeViewDocument(db, 'ep-01', (id) => `t${id}`, 'merged');
    expect(doc.timelines).toHaveLength(1);
    expect(doc.timelines[0].tokens).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(doc.timelines[0].tokenTexts[0]).toBe('t1');
    expect(doc.savings).toMatchObject({ naiveTokens: 16, mergedTokens: 9 });
    expect(doc.decisions.map((d) => d.action)).toEqual(['started', 'joined']);
    expect(
      doc.calls.map((c) => [c.callId, c.promptIds.length, c.messages.length, c.promptTokenTexts.length]),
    ).toEqual([
      ['ep-01-a', 0, 0, 0],
      ['ep-01-b', 0, 0, 0],
    ]);
    const naive = mergeViewDocument(db, 'ep-01', String, 'naive');
    expect(naive.timelines.map((t) => t.tokens.length)).toEqual([7, 9]);
    expect(naive.savings.mergedTokens).toBe(16);
  });
});
