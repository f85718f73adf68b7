/**
 * Prepared statements, compiled once per database handle. better-sqlite3 compiles SQL on every `prepare`, which
 * is most of the cost of a small insert on the gateway's hot path (one per LLM call).
 */
import type { Database, Statement } from 'better-sqlite3';

const cache = new WeakMap<Database, Map<string, Statement>>();

export function statement(db: Database, sql: string): Statement {
  let statements = cache.get(db);
  if (!statements) {
    statements = new Map();
    cache.set(db, statements);
  }
  let prepared = statements.get(sql);
  if (!prepared) {
    prepared = db.prepare(sql);
    statements.set(sql, prepared);
  }
  return prepared;
}
