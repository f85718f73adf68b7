/**
 * Opens the peer's SQLite store: WAL journal (readers never block the writer, a crash loses nothing committed),
 * foreign keys on, and every pending migration applied in order, each in its own transaction.
 */
import Database from 'better-sqlite3';
import type { Database as SqliteDatabase } from 'better-sqlite3';
import { migrations as defaultMigrations, type Migration } from './migrations.ts';

export class StoreVersionError extends Error {
  override name = 'StoreVersionError';
}

export function openStore(path: string, migrations: Migration[] = defaultMigrations): SqliteDatabase {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  // NORMAL is durable in WAL mode for committed transactions against process crashes (kill -9).
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  try {
    migrate(db, migrations);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

export function schemaVersion(db: SqliteDatabase): number {
  return db.pragma('user_version', { simple: true }) as number;
}

function migrate(db: SqliteDatabase, migrations: Migration[]): void {
  const sorted = [...migrations].sort((a, b) => a.version - b.version);
  const latest = sorted.at(-1)?.version ?? 0;
  const current = schemaVersion(db);
  if (current > latest) {
    throw new StoreVersionError(
      `store schema version ${current} is newer than this build knows (${latest}); use a newer AgentJet or another --data-dir`,
    );
  }
  for (const migration of sorted) {
    if (migration.version <= current) continue;
    db.transaction(() => {
      migration.up(db);
      db.pragma(`user_version = ${migration.version}`);
    })();
  }
}
