/** A store opened read-only: readable, never written, and a schema this build cannot read refused by name. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from './db.ts';
import { listEpisodes } from './episode-list.ts';
import { insertEpisode } from './episodes.ts';
import { latestSchemaVersion, openStoreReadOnly } from './read-only.ts';

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-read-only-'));
  path = join(dir, 'agentjet.sqlite');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function storeAtVersion(version?: number, file = path) {
  const db = openStore(file);
  insertEpisode(db, { id: 'ep-1', model: 'tiny', taskId: 't', kind: 'train', policyVersion: 0 });
  if (version !== undefined) db.pragma(`user_version = ${version}`);
  db.close();
}

describe('openStoreReadOnly', () => {
  it('reads a store and refuses every write', () => {
    storeAtVersion();
    const db = openStoreReadOnly(path);
    try {
      expect(listEpisodes(db).total).toBe(1);
      expect(() => insertEpisode(db, { id: 'ep-2', model: 'tiny', taskId: 't', kind: 'train', policyVersion: 0 })).toThrow(
        expect.objectContaining({ code: expect.stringMatching(/^SQLITE_READONLY/) }),
      );
    } finally {
      db.close();
    }
  });

  it('refuses a newer schema, and one older than the caller reads, without migrating it', () => {
    storeAtVersion(latestSchemaVersion() + 1);
    expect(() => openStoreReadOnly(path)).toThrow(expect.objectContaining({ name: 'StoreVersionError' }));
    const older = join(dir, 'older.sqlite');
    storeAtVersion(6, older);
    expect(() => openStoreReadOnly(older, { minSchemaVersion: 7 })).toThrow(expect.objectContaining({ name: 'StoreVersionError' }));
    expect(() => openStoreReadOnly(older)).toThrow(expect.objectContaining({ name: 'StoreVersionError' }));
    const db = openStoreReadOnly(older, { minSchemaVersion: 6 });
    expect(db.pragma('user_version', { simple: true })).toBe(6); // read as it is: no migration ran
    db.close();
  });

  it('names a missing file and a file that is no store', () => {
    expect(() => openStoreReadOnly(join(dir, 'none.sqlite'))).toThrow(expect.objectContaining({ name: 'StoreUnreadableError' }));
    writeFileSync(path, 'not a database, just some text that is long enough to have a header '.repeat(10));
    expect(() => openStoreReadOnly(path)).toThrow(expect.objectContaining({ name: 'StoreUnreadableError' }));
  });
});
