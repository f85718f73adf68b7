/**
 * Small files the peer replaces whole (identity.json, control.json): written to `<file>.<pid>.tmp`, then renamed
 * over the file, so a reader sees the old file or the new one, never half of one. A write that fails (a full disk)
 * removes its temp file; `cleanStaleTempFiles` removes those a killed process left behind.
 */
import { readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The write failed because the disk (or the user's quota) is full; `cause` is the error the system gave. */
export class DiskFullError extends Error {
  override name = 'DiskFullError';
  constructor(readonly path: string, options: { cause: unknown }) {
    super(`no space left to write ${path}; free some space on that disk (or move the data directory with --data-dir) and start again`, options);
  }
}

/** ENOSPC (no space), EDQUOT (quota exceeded), SQLite's SQLITE_FULL, or a DiskFullError — also as a `cause`. */
export function isDiskFullError(err: unknown): boolean {
  // A cause chain is short; the bound only guards against a cycle.
  for (let e = err, depth = 0; e instanceof Error && depth < MAX_CAUSE_DEPTH; e = e.cause, depth++) {
    if (e instanceof DiskFullError) return true;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL') return true;
  }
  return false;
}
const MAX_CAUSE_DEPTH = 8;

export function tempPathFor(path: string, pid = process.pid): string {
  return `${path}.${pid}.tmp`;
}

/** Write `data` to `path` atomically (temp file + rename); on failure the temp file is gone and `path` untouched. */
export function writeFileAtomic(path: string, data: string | Uint8Array, options: { mode?: number } = {}): void {
  const tmp = tempPathFor(path);
  try {
    writeFileSync(tmp, data, { mode: options.mode });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw isDiskFullError(err) ? new DiskFullError(path, { cause: err }) : err;
  }
}

/**
 * Remove `<file>.<pid>.tmp` in `dir` whose process is gone (killed mid-write). A live process's temp file is left
 * alone: it may be writing it right now. `files` limits this to the temp files of those names. Returns the names
 * removed.
 */
export function cleanStaleTempFiles(dir: string, files?: readonly string[]): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const removed: string[] = [];
  for (const name of names) {
    const m = TEMP_NAME.exec(name);
    if (!m || (files && !files.includes(m[1]))) continue;
    const pid = Number(m[2]);
    // Our own are stale too: writeFileAtomic is synchronous, so none of ours is half-written while this runs.
    if (pid !== process.pid && processIsAlive(pid)) continue;
    rmSync(join(dir, name), { force: true });
    removed.push(name);
  }
  return removed;
}
const TEMP_NAME = /^(.+)\.(\d+)\.tmp$/;

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
