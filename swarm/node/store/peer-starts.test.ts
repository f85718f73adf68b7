/** The peer_starts table and the store's episode count, on real SQLite files. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from './db.ts';
import { insertEpisode } from './episodes.ts';
import { migrations } from './migrations.ts';
import { countEpisodes, recordPeerStart, recordPeerStop } from './peer-starts.ts';
import { tempStore } from './testing/episodes.ts';

let store: ReturnType<typeof tempStore>;
beforeEach(() => {
  store = tempStore('peer-starts');
});
afterEach(() => store.close());

describe('peer starts', () => {
  it('records a start and its stop', () => {
    recordPeerStart(store.db, { id: 'r1', startedAt: '2026-01-01T00:00:00Z', version: '1.2.3', args: ['serve', '--port', '0'] });
    recordPeerStop(store.db, 'r1', '2026-01-01T01:00:00Z');
    expect(store.db.prepare('SELECT * FROM peer_starts').all()).toEqual([
      { id: 'r1', started_at: '2026-01-01T00:00:00Z', stopped_at: '2026-01-01T01:00:00Z', version: '1.2.3', args: '["serve","--port","0"]' },
    ]);
  });

  it('counts episodes, and none in a store without the episodes table', () => {
    expect(countEpisodes(store.db)).toBe(0);
    insertEpisode(store.db, { id: 'e1', model: 'm', taskId: 't', kind: 'train', policyVersion: 0 });
    expect(countEpisodes(store.db)).toBe(1);
    const { name } = store.db;
    store.db.close();
    const first = openStore(`${name}.v1`, migrations.filter((m) => m.version === 1));
    try {
      expect(countEpisodes(first)).toBe(0);
    } finally {
      first.close();
    }
  });
});
