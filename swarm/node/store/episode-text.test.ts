/** Search over what was said in episodes: real SQLite files, calls stored through the store's own insertCall. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CallRecord } from '../../common/timeline/call.ts';
import type { ChatMessage } from '../../../worker/tokenizer/types.ts';
import { openStore, schemaVersion } from './db.ts';
import { listEpisodes } from './episode-list.ts';
import { episodeTextQuery } from './episode-text.ts';
import { insertCall, insertEpisode } from './episodes.ts';
import { migrations } from './migrations.ts';

let dir: string;
const open: Database[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-episode-text-'));
});

afterEach(() => {
  for (const db of open.splice(0)) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function store(upTo?: number): Database {
  const db = openStore(join(dir, 'store.sqlite'), upTo === undefined ? migrations : migrations.filter((m) => m.version <= upTo));
  open.push(db);
  return db;
}

function call(index: number, messages: ChatMessage[], answer: ChatMessage | null, agentKey = 'agent'): CallRecord {
  const time = '2026-01-01T00:00:00Z';
  return {
    callId: `c${index}`,
    index,
    agentKey,
    messages,
    tools: null,
    promptIds: [1, 2],
    generatedIds: [3],
    logprobs: [-0.5],
    assistantMessage: answer,
    finishReason: 'stop',
    policyVersion: 1,
    timings: { startedAt: time, firstTokenAt: null, endedAt: time },
    splice: { assistantTurns: 0, splicedTurns: 0, driftPreventedTurns: 0, turns: [] },
  };
}

/** A two-call calculator conversation: the second request repeats the first and adds the tool's answer. */
function storeConversation(db: Database, id: string, rareWord: string) {
  insertEpisode(db, { id, model: 'tiny', taskId: 'task-1', kind: 'train', policyVersion: 1 });
  const user: ChatMessage = { role: 'user', content: 'What is 12 times 7?' };
  const toolCall: ChatMessage = {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 't1', type: 'function', function: { name: 'calc', arguments: '{"expr":"12*7"}' } }],
  };
  insertCall(db, id, call(0, [{ role: 'system', content: 'You are careful.' }, user], toolCall));
  const tool: ChatMessage = { role: 'tool', content: 'result eighty-four', tool_call_id: 't1' };
  insertCall(
    db,
    id,
    call(1, [{ role: 'system', content: 'You are careful.' }, user, toolCall, tool], { role: 'assistant', content: `It is 84, ${rareWord}.` }),
  );
}

const ids = (db: Database, text: string) => listEpisodes(db, { text }).episodes.map((e) => e.id);

describe('search over what was said', () => {
  it('finds an episode by a word its assistant said, by tool text and tool-call arguments, any case and accent', () => {
    const db = store();
    storeConversation(db, 'ep-a', 'Zanzibar');
    storeConversation(db, 'ep-b', 'plainly');
    expect(ids(db, 'zanzibar')).toEqual(['ep-a']);
    expect(ids(db, 'ZANZ')).toEqual(['ep-a']);
    expect(ids(db, 'Zânzibar')).toEqual(['ep-a']);
    expect(ids(db, 'eighty four')).toEqual(expect.arrayContaining(['ep-a', 'ep-b']));
    expect(ids(db, 'calc 12')).toHaveLength(2);
    // Every word must occur: "zanzibar" and "plainly" were said in different episodes.
    expect(ids(db, 'zanzibar plainly')).toEqual([]);
    expect(ids(db, 'nowhere-said')).toEqual([]);
  });

  it('indexes a repeated history once per agent, and each agent’s own messages', () => {
    const db = store();
    storeConversation(db, 'ep-a', 'Zanzibar');
    insertCall(db, 'ep-a', call(2, [{ role: 'user', content: 'critic: check the arithmetic' }], null, 'critic'));
    const rows = db.prepare('SELECT text FROM episode_text WHERE episode_id = ?').all('ep-a') as { text: string }[];
    const careful = rows.filter((row) => row.text.includes('You are careful.'));
    expect(careful).toHaveLength(1);
    expect(ids(db, 'arithmetic critic')).toEqual(['ep-a']);
  });

  it('backfills the calls stored before the index existed', () => {
    const old = store(4);
    storeConversation(old, 'ep-old', 'Timbuktu');
    old.close();
    const db = store();
    expect(schemaVersion(db)).toBeGreaterThanOrEqual(5); // later migrations may follow
    expect(ids(db, 'timbuktu')).toEqual(['ep-old']);
  });

  it('forgets a deleted episode’s text', () => {
    const db = store();
    storeConversation(db, 'ep-a', 'Zanzibar');
    db.prepare('DELETE FROM episodes WHERE id = ?').run('ep-a');
    expect((db.prepare('SELECT COUNT(*) AS n FROM episode_text').get() as { n: number }).n).toBe(0);
  });
});

describe('episodeTextQuery', () => {
  it('quotes every word as a prefix, so nothing typed is read as FTS5 syntax', () => {
    expect(episodeTextQuery('calc NEAR("x") OR y*')).toBe('"calc"* "NEAR"* "x"* "OR"* "y"*');
    expect(episodeTextQuery('% _ -')).toBeNull();
  });
});
