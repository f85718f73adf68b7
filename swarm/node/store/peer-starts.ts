/** The peer's starts (one row per start of `agentjet serve`/`node`; migrations 1 and 9) and what its status reports of the store. */
import type { Database } from 'better-sqlite3';
import { statement } from './statements.ts';

export interface PeerStart {
  id: string;
  /** ISO time. */
  startedAt: string;
  /** The app version that ran. */
  version: string;
  /** Its command-line arguments. */
  args: readonly string[];
}

export function recordPeerStart(db: Database, start: PeerStart): void {
  statement(db, 'INSERT INTO peer_starts (id, started_at, version, args) VALUES (?, ?, ?, ?)').run(
    start.id,
    start.startedAt,
    start.version,
    JSON.stringify(start.args),
  );
}

export function recordPeerStop(db: Database, startId: string, stoppedAt = new Date().toISOString()): void {
  statement(db, 'UPDATE peer_starts SET stopped_at = ? WHERE id = ?').run(stoppedAt, startId);
}

/** Episodes in the store; 0 for a store whose migrations stop before the episodes table (opened with fewer). */
export function countEpisodes(db: Database): number {
  const table = statement(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'episodes'").get();
  if (!table) return 0;
  return (statement(db, 'SELECT COUNT(*) AS n FROM episodes').get() as { n: number }).n;
}
