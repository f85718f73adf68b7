/**
 * Opening a stopped peer's store to read it (the CLI's offline commands, cli/offline-store.ts): read-only at the
 * file level and `query_only` on top, no migration ever run, and a schema this build cannot read refused by name.
 * Reading beside a running peer is safe too (WAL: readers never block its writer), but the CLI asks that peer.
 */
import Database from 'better-sqlite3';
import type { Database as SqliteDatabase } from 'better-sqlite3';
import { schemaVersion, StoreVersionError } from './db.ts';
import { migrations } from './migrations.ts';

/** The file is not an SQLite database (or is damaged). */
export class StoreUnreadableError extends Error {
  override name = 'StoreUnreadableError';
}

export interface ReadOnlyStoreOptions {
  /**
   * The oldest schema version whose tables the caller reads (default: the latest this build knows). An older
   * store cannot be upgraded without writing: a peer started on it once migrates it.
   */
  minSchemaVersion?: number;
}

/** How long a read waits for a peer's write lock (a checkpoint) before SQLITE_BUSY. */
const READ_BUSY_TIMEOUT_MS = 5_000;

export function latestSchemaVersion(): number {
  return Math.max(...migrations.map((m) => m.version));
}

export function openStoreReadOnly(path: string, options: ReadOnlyStoreOptions = {}): SqliteDatabase {
  const latest = latestSchemaVersion();
  const oldest = options.minSchemaVersion ?? latest;
  let db: SqliteDatabase;
  try {
    db = new Database(path, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new StoreUnreadableError(`cannot open ${path} read-only: ${(err as Error).message}`, { cause: err });
  }
  try {
    db.pragma('query_only = ON');
    db.pragma(`busy_timeout = ${READ_BUSY_TIMEOUT_MS}`);
    let version: number;
    try {
      version = schemaVersion(db);
    } catch (err) {
      throw new StoreUnreadableError(`${path} is not a readable AgentJet store: ${(err as Error).message}`, { cause: err });
    }
    if (version > latest)
      throw new StoreVersionError(
        `store ${path} has schema version ${version}, newer than this build knows (${latest}); use a newer AgentJet`,
      );
    if (version < oldest)
      throw new StoreVersionError(
        `store ${path} has schema version ${version}, older than ${oldest}; start a peer on it once (agentjet node --data-dir …) to upgrade it`,
      );
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}
