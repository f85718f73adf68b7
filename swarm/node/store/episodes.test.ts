import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { episodeExportSchema } from '../../common/timeline/export.ts';
import { loadQwen3, scriptedCall } from '../tracker/testing/qwen3.ts';
import { EpisodeTracker } from '../tracker/tracker.ts';
import { openStore, schemaVersion } from './db.ts';
import { listEpisodes } from './episode-list.ts';
import { getCalls, getEpisode, getEpisodeExport, getTimelines } from './episode-reads.ts';
import { abortEpisode, endEpisode, insertCall, insertEpisode, type NewEpisode } from './episodes.ts';
import { insertTrainStep, latestTrainStep, listTrainSteps } from './train-steps.ts';

const tools: ToolSpec[] = [
  {
    type: 'function',
    function: { name: 'search', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
  },
];

let dir: string;
let path: string;
let db: Database;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-episodes-'));
  path = join(dir, 'store.sqlite');
  db = openStore(path);
});

afterEach(() => {
  if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function newEpisode(id: string, extra: Partial<NewEpisode> = {}): NewEpisode {
  return {
    id,
    model: 'qwen3-tiny',
    taskId: 'task-a',
    kind: 'train',
    policyVersion: 3,
    createdAt: `2026-01-01T00:00:0${id.slice(-1)}Z`,
    ...extra,
  };
}

/** A two-call tool episode with a drifting first answer, played through the tracker that persists each call. */
function playEpisode(episodeId: string): EpisodeTracker {
  const { tokenizer, template } = loadQwen3();
  const tracker = new EpisodeTracker({
    episodeId,
    tokenizer,
    template,
    sink: (id, call) => insertCall(db, id, call),
  });
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Research agent.' },
    { role: 'user', content: 'Find the capital of Peru.' },
  ];
  const first = scriptedCall(
    tracker,
    [...messages],
    {
      reasoning: 'Search it.',
      content: 'hello',
      toolCalls: [{ name: 'search', arguments: '{"q": "capital of Peru"}' }],
      splitAt: ['lo'],
    },
    { tools },
  );
  messages.push(first.assistantMessage!, {
    role: 'tool',
    content: 'Lima',
    tool_call_id: first.assistantMessage!.tool_calls![0].id,
  });
  scriptedCall(tracker, [...messages], { reasoning: 'Found.', content: 'Lima.' }, { tools });
  return tracker;
}

describe('episode store on a real SQLite file', () => {
  it('reads back identical calls, timelines and decisions after reopening the file', () => {
    expect(schemaVersion(db)).toBeGreaterThanOrEqual(2);
    insertEpisode(db, newEpisode('ep1', { client: 'peer-7', scriptHash: 'abc123', teamId: 'team-1' }));
    const tracker = playEpisode('ep1');
    const merge = tracker.merge();
    expect(merge.timelines).toHaveLength(1);
    endEpisode(db, 'ep1', {
      reward: 0.75,
      success: true,
      metrics: { turns: 2 },
      endedAt: '2026-01-01T00:01:00Z',
      calls: tracker.calls,
      merge,
    });
    db.close();

    db = openStore(path);
    expect(getEpisode(db, 'ep1')).toEqual({
      id: 'ep1',
      model: 'qwen3-tiny',
      taskId: 'task-a',
      groupId: 'task-a',
      kind: 'train',
      state: 'ended',
      reward: 0.75,
      success: true,
      metrics: { turns: 2 },
      abortReason: null,
      createdAt: '2026-01-01T00:00:01Z',
      endedAt: '2026-01-01T00:01:00Z',
      client: 'peer-7',
      scriptHash: 'abc123',
      policyVersion: 3,
      teamId: 'team-1',
      cancelledCalls: 0,
    });
    expect(getCalls(db, 'ep1')).toEqual(tracker.calls);
    expect(getTimelines(db, 'ep1')).toEqual(merge);
  });

  it('ends an episode all at once or not at all', () => {
    insertEpisode(db, newEpisode('ep1'));
    const tracker = playEpisode('ep1');
    // A call that clashes with a stored one (same call id, other index) makes the end fail half way…
    const clash = { ...tracker.calls[1], index: 9, callId: tracker.calls[0].callId };
    expect(() =>
      endEpisode(db, 'ep1', { reward: 1, calls: [...tracker.calls, clash], merge: tracker.merge() }),
    ).toThrow(expect.objectContaining({ name: 'SqliteError', code: expect.stringMatching(/^SQLITE_CONSTRAINT/) }));
    // …and nothing of it is kept: still active, no reward, no timelines.
    expect(getEpisode(db, 'ep1')).toMatchObject({ state: 'active', reward: null });
    expect(getTimelines(db, 'ep1')).toBeNull();
    expect(getCalls(db, 'ep1')).toHaveLength(2);

    abortEpisode(db, 'ep1', 'idle timeout');
    expect(() => endEpisode(db, 'ep1', { reward: 1, calls: tracker.calls, merge: tracker.merge() })).toThrow(
      expect.objectContaining({ name: 'EpisodeStateError', state: 'aborted' }),
    );
    expect(getEpisode(db, 'ep1')).toMatchObject({
      state: 'aborted',
      abortReason: 'idle timeout',
      reward: null,
    });
  });

  it('refuses a second episode with the same id and unknown episodes', () => {
    insertEpisode(db, newEpisode('ep1'));
    expect(() => insertEpisode(db, newEpisode('ep1'))).toThrow(
      expect.objectContaining({ name: 'EpisodeExistsError' }),
    );
    expect(() => abortEpisode(db, 'nope', 'x')).toThrow(
      expect.objectContaining({ name: 'EpisodeNotFoundError' }),
    );
    expect(() => getEpisodeExport(db, 'nope', loadQwen3().tokenizer)).toThrow(
      expect.objectContaining({ name: 'EpisodeNotFoundError' }),
    );
  });

  it('lists episodes by filter, newest first, a page at a time', () => {
    for (let i = 1; i <= 5; i++)
      insertEpisode(
        db,
        newEpisode(`ep${i}`, { taskId: i % 2 ? 'odd' : 'even', kind: i === 5 ? 'eval' : 'train' }),
      );
    abortEpisode(db, 'ep3', 'crashed');

    const page1 = listEpisodes(db, { kind: 'train', limit: 2 });
    expect(page1.total).toBe(4);
    expect(page1.episodes.map((e) => e.id)).toEqual(['ep4', 'ep3']);
    expect(listEpisodes(db, { kind: 'train', limit: 2, offset: 2 }).episodes.map((e) => e.id)).toEqual([
      'ep2',
      'ep1',
    ]);
    expect(listEpisodes(db, { taskId: 'odd', state: 'active' }).episodes.map((e) => e.id)).toEqual([
      'ep5',
      'ep1',
    ]);
    expect(listEpisodes(db, { groupId: 'even', state: ['active', 'aborted'] }).total).toBe(2);
    expect(() => listEpisodes(db, { limit: 0 })).toThrow(
      expect.objectContaining({ name: 'EpisodeQueryError' }),
    );
  });

  it('exports an episode for the merge view, with token texts and the naive comparison', () => {
    const { tokenizer } = loadQwen3();
    insertEpisode(db, newEpisode('ep1'));
    const tracker = playEpisode('ep1');
    endEpisode(db, 'ep1', { reward: 1, calls: tracker.calls, merge: tracker.merge() });

    const merged = episodeExportSchema.parse(getEpisodeExport(db, 'ep1', tokenizer));
    expect(merged.timelines).toHaveLength(1);
    expect(merged.timelines[0].tokenTexts).toHaveLength(merged.timelines[0].tokens.length);
    expect(merged.calls[0].generatedTokenTexts).toContain('hel');
    expect(merged.calls[1].splice.turns[0]).toMatchObject({ outcome: 'spliced', driftPrevented: true });
    expect(merged.decisions.map((d) => d.reason)).toEqual(['first-call', 'extends-timeline']);

    const naive = episodeExportSchema.parse(getEpisodeExport(db, 'ep1', tokenizer, 'naive'));
    expect(naive.timelines).toHaveLength(2);
    expect(naive.savings.mergedTokens).toBe(merged.savings.naiveTokens);
    expect(merged.savings.mergedTokens).toBeLessThan(merged.savings.naiveTokens);
  });

  it('records training steps per model', () => {
    insertTrainStep(db, {
      model: 'm',
      step: 1,
      policyVersion: 1,
      metrics: { loss: 0.5 },
      createdAt: '2026-01-01T00:00:00Z',
    });
    insertTrainStep(db, {
      model: 'm',
      step: 2,
      policyVersion: 2,
      metrics: { loss: 0.25 },
      createdAt: '2026-01-01T00:01:00Z',
    });
    expect(() =>
      insertTrainStep(db, { model: 'm', step: 2, policyVersion: 2, metrics: {}, createdAt: '' }),
    ).toThrow(expect.objectContaining({ name: 'TrainStepExistsError' }));
    expect(listTrainSteps(db, 'm', { afterStep: 1 }).map((s) => s.metrics)).toEqual([{ loss: 0.25 }]);
    expect(latestTrainStep(db, 'm')).toMatchObject({ step: 2, policyVersion: 2 });
    expect(latestTrainStep(db, 'other')).toBeUndefined();
  });
});
