/** Episodes for store and route tests, written through the store's own functions into a real SQLite file. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import type { CallRecord } from '../../../common/timeline/call.ts';
import { mergeTimelines, type MergeCall } from '../../../common/timeline/merge.ts';
import { openStore } from '../db.ts';
import { endEpisode, insertEpisode } from '../episodes.ts';

/** A fresh store in a temp dir; `close` closes it and removes the dir. */
export function tempStore(name: string): { db: Database; close(): void } {
  const dir = mkdtempSync(join(tmpdir(), `agentjet-${name}-`));
  const db = openStore(join(dir, 'store.sqlite'));
  return {
    db,
    close() {
      if (db.open) db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function callRecord(call: MergeCall, index: number): CallRecord {
  const time = '2026-01-01T00:00:00Z';
  return {
    callId: call.callId,
    index,
    agentKey: 'agent',
    messages: [{ role: 'user', content: 'hello' }],
    tools: [{ type: 'function', function: { name: 'calc', parameters: { type: 'object' } } }],
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

/**
 * An ended two-call episode whose second call extends the first: naive 5+2+7+2 = 16 tokens, merged 9. Created at
 * second `id.slice(-2)` of 2026, so ids ending in larger numbers are newer.
 */
export function storeEndedEpisode(db: Database, id: string, model: string, taskId: string, client: string): void {
  insertEpisode(db, {
    id,
    model,
    taskId,
    kind: 'train',
    policyVersion: 1,
    client,
    createdAt: `2026-01-01T00:00:${id.slice(-2)}Z`,
  });
  const calls: MergeCall[] = [
    { callId: `${id}-a`, promptIds: [1, 2, 3, 4, 5], generatedIds: [6, 7], generatedLogprobs: [-0.1, -0.2], policyVersion: 1 },
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
