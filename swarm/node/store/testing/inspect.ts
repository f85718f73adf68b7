/**
 * Reads (and one deliberate corruption) that tests and the chaos harness need from a store and no product code
 * does: row counts per table, the rows an invariant is checked over. Product code reads through the repositories.
 */
import type { Database } from 'better-sqlite3';
import { decodeInt32, encodeInt32 } from '../blobs.ts';
import { statement } from '../statements.ts';

/** Tables whose row counts say whether a request changed anything. */
const COUNTED_TABLES = ['calls', 'timelines', 'train_steps', 'client_scripts', 'client_runs', 'client_keys'] as const;
export type CountedTable = (typeof COUNTED_TABLES)[number];

export function tableCounts(db: Database): Record<CountedTable, number> {
  return Object.fromEntries(
    COUNTED_TABLES.map((table) => [table, (statement(db, `SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n]),
  ) as Record<CountedTable, number>;
}

export function episodesByState(db: Database): Record<string, number> {
  const rows = statement(db, 'SELECT state, COUNT(*) AS n FROM episodes GROUP BY state ORDER BY state').all() as { state: string; n: number }[];
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

export function trainEpisodeRows(db: Database, model: string): { id: string; state: string; abort_reason: string | null }[] {
  return statement(db, "SELECT id, state, abort_reason FROM episodes WHERE model = ? AND kind = 'train'").all(model) as {
    id: string;
    state: string;
    abort_reason: string | null;
  }[];
}

export function policyRestoreRows(db: Database, model: string): { policy_version: number; checkpoint_step: number }[] {
  return statement(db, 'SELECT policy_version, checkpoint_step FROM policy_restores WHERE model = ? ORDER BY policy_version').all(model) as {
    policy_version: number;
    checkpoint_step: number;
  }[];
}

/** Replaces the last token of an episode's first stored timeline (a sample the engine must refuse). */
export function corruptLastTimelineToken(db: Database, episodeId: string, token: number): void {
  const row = statement(db, 'SELECT tokens FROM timelines WHERE episode_id = ? AND idx = 0').get(episodeId) as { tokens: Buffer };
  const tokens = decodeInt32(row.tokens);
  tokens[tokens.length - 1] = token;
  statement(db, 'UPDATE timelines SET tokens = ? WHERE episode_id = ? AND idx = 0').run(encodeInt32(tokens), episodeId);
}
