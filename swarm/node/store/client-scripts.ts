/**
 * The client runner's scripts in the store: every attached version (`client_scripts`, one row per name and
 * version, never changed) and what is attached now (`client_attachments`, one row per name, so a restarted peer
 * picks its scripts up again). Options are stored as JSON; whoever reads them back validates them.
 */
import type { Database, Statement } from 'better-sqlite3';

/** One attached version of a script. */
export interface ClientScriptVersionRow {
  name: string;
  version: number;
  /** sha256 of the content, hex. */
  hash: string;
  /** The snapshot that runs. */
  file: string;
  /** Where it came from (a path, or "upload:<filename>"). */
  origin: string;
  /** The attach options, as given (JSON-serialisable). */
  options: unknown;
  attachedAt: string;
}

/** What an attachment is now; `detached` rows are kept (versions continue) but not restored. */
export type AttachmentState = 'running' | 'paused' | 'broken' | 'finished' | 'detached';

export interface ClientAttachmentRow {
  name: string;
  version: number;
  file: string;
  /** The attach options; parsed JSON, not yet validated. */
  options: unknown;
  state: AttachmentState;
  reason: string | null;
  updatedAt: string;
}

interface AttachmentRecord {
  name: string;
  version: number;
  file: string;
  options: string;
  state: AttachmentState;
  reason: string | null;
  updated_at: string;
}

export class ClientScriptsRepository {
  private readonly insertVersionStmt: Statement;
  private readonly latestVersionStmt: Statement;
  private readonly saveAttachmentStmt: Statement;
  private readonly restorableStmt: Statement;

  constructor(private readonly db: Database) {
    this.insertVersionStmt = db.prepare(
      'INSERT INTO client_scripts (name, version, hash, file, origin, options, attached_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    this.latestVersionStmt = db.prepare('SELECT MAX(version) AS v FROM client_scripts WHERE name = ?');
    this.saveAttachmentStmt = db.prepare(
      `INSERT INTO client_attachments (name, version, file, options, state, reason, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, file = excluded.file, options = excluded.options,
         state = excluded.state, reason = excluded.reason, updated_at = excluded.updated_at`,
    );
    this.restorableStmt = db.prepare(
      "SELECT name, version, file, options, state, reason, updated_at FROM client_attachments WHERE state IN ('running', 'paused', 'broken') ORDER BY name",
    );
  }

  /** False once the handle is closed (a runner may outlive the peer's store by a moment while it stops). */
  get open(): boolean {
    return this.db.open;
  }

  /** The highest version ever attached under `name` (0 when none): versions continue across detach and restart. */
  latestVersion(name: string): number {
    return (this.latestVersionStmt.get(name) as { v: number | null }).v ?? 0;
  }

  insertVersion(row: ClientScriptVersionRow): void {
    this.insertVersionStmt.run(row.name, row.version, row.hash, row.file, row.origin, JSON.stringify(row.options), row.attachedAt);
  }

  /** Inserts or replaces the attachment of `row.name`. */
  saveAttachment(row: ClientAttachmentRow): void {
    this.saveAttachmentStmt.run(row.name, row.version, row.file, JSON.stringify(row.options), row.state, row.reason, row.updatedAt);
  }

  /** Attachments that were live (running, paused or broken) when the peer last stopped. */
  restorable(): ClientAttachmentRow[] {
    return (this.restorableStmt.all() as AttachmentRecord[]).map((r) => ({
      name: r.name,
      version: r.version,
      file: r.file,
      options: JSON.parse(r.options) as unknown,
      state: r.state,
      reason: r.reason,
      updatedAt: r.updated_at,
    }));
  }
}

const repositories = new WeakMap<Database, ClientScriptsRepository>();

/** The repository of a database handle; its statements are prepared once per handle. */
export function clientScripts(db: Database): ClientScriptsRepository {
  let repository = repositories.get(db);
  if (!repository) repositories.set(db, (repository = new ClientScriptsRepository(db)));
  return repository;
}
