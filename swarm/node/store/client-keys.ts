/**
 * Client-key generations (migration 6). A client key carries the generation it was minted in (episodes/keys.ts);
 * revoking a client's keys raises its generation, so every key minted before stops working at once, across
 * restarts, while a new key can be minted right after.
 */
import type { Database } from 'better-sqlite3';
import { statement } from './statements.ts';

/** The generation new keys of the client are minted in (0 until its keys are first revoked). */
export function clientKeyGeneration(db: Database, client: string): number {
  const row = statement(db, 'SELECT generation FROM client_keys WHERE client = ?').get(client) as { generation: number } | undefined;
  return row?.generation ?? 0;
}

/** Revokes every key of the client minted so far; returns the new generation. */
export function revokeClientKeys(db: Database, client: string, now = new Date()): number {
  const next = clientKeyGeneration(db, client) + 1;
  statement(
    db,
    `INSERT INTO client_keys (client, generation, revoked_at) VALUES (?, ?, ?)
     ON CONFLICT (client) DO UPDATE SET generation = excluded.generation, revoked_at = excluded.revoked_at`,
  ).run(client, next, now.toISOString());
  return next;
}
