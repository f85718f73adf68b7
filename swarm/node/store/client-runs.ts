/**
 * The client runner's runs in the store (`client_runs`): one row per finished run of an attached script, with
 * its outcome (an aborted one's reason as a code, migration 8, and as prose), the script hash that ran, and the
 * captured output. Rows written before codes existed read back with `code: null`.
 */
import type { Database, Statement } from 'better-sqlite3';
import { runAbortCodeSchema, type ClientRunRecord, type RunAbortCode } from '../../common/runner-api.ts';

/** A run as the store keeps it: finished (ended or aborted), so `endedAt` is set. */
export type StoredClientRun = ClientRunRecord & { status: 'ended' | 'aborted'; endedAt: string };

interface RunRow {
  id: number;
  client: string;
  script_hash: string;
  episode_ids: string;
  task_id: string;
  kind: 'train' | 'eval';
  status: 'ended' | 'aborted';
  reason: string | null;
  code: string | null;
  reward: number | null;
  exit_code: number | null;
  process_ms: number | null;
  stdout: string;
  stderr: string;
  started_at: string;
  ended_at: string;
}

/** A code the schema knows, or null (rows from before codes, or from a newer peer's vocabulary). */
function knownCode(stored: string | null): RunAbortCode | null {
  const code = runAbortCodeSchema.safeParse(stored);
  return code.success ? code.data : null;
}

function fromRow(row: RunRow): StoredClientRun {
  return {
    episodeIds: JSON.parse(row.episode_ids) as string[],
    client: row.client,
    scriptHash: row.script_hash,
    taskId: row.task_id,
    kind: row.kind,
    status: row.status,
    reason: row.reason,
    code: knownCode(row.code),
    reward: row.reward,
    exitCode: row.exit_code,
    processMs: row.process_ms,
    stdout: row.stdout,
    stderr: row.stderr,
    startedAt: row.started_at,
    endedAt: row.ended_at,
  };
}

export class ClientRunsRepository {
  private readonly insertStmt: Statement;
  private readonly latestStmt: Statement;
  private readonly latestOfClientStmt: Statement;
  private readonly countStmt: Statement;
  private readonly countOfClientStmt: Statement;

  constructor(private readonly db: Database) {
    this.insertStmt = db.prepare(
      `INSERT INTO client_runs (client, script_hash, episode_ids, task_id, kind, status, reason, code, reward, exit_code, process_ms, stdout, stderr, started_at, ended_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.latestStmt = db.prepare('SELECT * FROM client_runs ORDER BY id DESC LIMIT ?');
    this.latestOfClientStmt = db.prepare('SELECT * FROM client_runs WHERE client = ? ORDER BY id DESC LIMIT ?');
    this.countStmt = db.prepare('SELECT COUNT(*) AS n FROM client_runs');
    this.countOfClientStmt = db.prepare('SELECT COUNT(*) AS n FROM client_runs WHERE client = ?');
  }

  get open(): boolean {
    return this.db.open;
  }

  insert(run: StoredClientRun): void {
    this.insertStmt.run(
      run.client,
      run.scriptHash,
      JSON.stringify(run.episodeIds),
      run.taskId,
      run.kind,
      run.status,
      run.reason,
      run.code ?? null,
      run.reward,
      run.exitCode,
      run.processMs,
      run.stdout,
      run.stderr,
      run.startedAt,
      run.endedAt,
    );
  }

  /** The newest `limit` runs (of one client, or of all), oldest first. */
  latest(client: string | undefined, limit: number): StoredClientRun[] {
    const rows = (client === undefined ? this.latestStmt.all(limit) : this.latestOfClientStmt.all(client, limit)) as RunRow[];
    return rows.reverse().map(fromRow);
  }

  count(client?: string): number {
    return (client === undefined ? (this.countStmt.get() as { n: number }) : (this.countOfClientStmt.get(client) as { n: number })).n;
  }
}

const repositories = new WeakMap<Database, ClientRunsRepository>();

/** The repository of a database handle; its statements are prepared once per handle. */
export function clientRuns(db: Database): ClientRunsRepository {
  let repository = repositories.get(db);
  if (!repository) repositories.set(db, (repository = new ClientRunsRepository(db)));
  return repository;
}
