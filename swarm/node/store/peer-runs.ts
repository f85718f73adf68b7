/** The peer's runs (one row per start of `agentjet serve`/`node`, migration 1) and what its status reports of the store. */
import type { Database } from 'better-sqlite3';
import { statement } from './statements.ts';

export interface PeerRunStart {
  id: string;
  /** ISO time. */
  startedAt: string;
  /** The app version that ran. */
  version: string;
  /** Its command-line arguments. */
  args: readonly string[];
}

export function recordRunStart(db: Database, run: PeerRunStart): void {
  statement(db, 'INSERT INTO runs (id, started_at, version, args) VALUES (?, ?, ?, ?)').run(
    run.id,
    run.startedAt,
    run.version,
    JSON.stringify(run.args),
  );
}

export function recordRunStop(db: Database, runId: string, stoppedAt = new Date().toISOString()): void {
  statement(db, 'UPDATE runs SET stopped_at = ? WHERE id = ?').run(stoppedAt, runId);
}

/** Episodes in the store; 0 for a store whose migrations stop before the episodes table (opened with fewer). */
export function countEpisodes(db: Database): number {
  const table = statement(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'episodes'").get();
  if (!table) return 0;
  return (statement(db, 'SELECT COUNT(*) AS n FROM episodes').get() as { n: number }).n;
}
