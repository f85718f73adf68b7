/**
 * Versioned schema migrations for the peer's SQLite store. Each runs once, in order, inside a transaction;
 * `PRAGMA user_version` records the last one applied. Append new migrations; never edit an applied one.
 */
import type { Database } from 'better-sqlite3';

export interface Migration {
  version: number;
  name: string;
  up: (db: Database) => void;
}

export const migrations: Migration[] = [
  {
    version: 1,
    name: 'node metadata',
    up: (db) => {
      db.exec(`
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE runs (
          id TEXT PRIMARY KEY,
          started_at TEXT NOT NULL,
          stopped_at TEXT,
          version TEXT NOT NULL,
          args TEXT NOT NULL
        );
      `);
    },
  },
];
