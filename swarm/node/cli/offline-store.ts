/**
 * Where a CLI command reads a peer's data: from the running peer, over its control API (it owns the store and knows
 * its models), or, when no peer runs on that data dir, straight from the store file, read-only
 * (store/read-only.ts: no migration, a schema this build cannot read refused by name). Used by `agentjet episodes`
 * and meant for every read-only command (`agentjet runs …`).
 *
 *   const access = peerOrOffline(dataDirOf(values));
 *   if (access.kind === 'peer') await access.client.get(…);
 *   else { const db = openOfflineStore(access.dataDir); try { … } finally { db.close(); } }
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Database } from 'better-sqlite3';
import { z } from 'zod';
import { dataPaths, defaultDataDir } from '../paths.ts';
import { openStoreReadOnly, type ReadOnlyStoreOptions } from '../store/read-only.ts';
import type { OptionValues } from './command.ts';
import { PeerClient } from './peer-client.ts';

/** Neither a running peer nor a store in the data dir that was looked at. */
export class NoPeerDataError extends Error {
  override name = 'NoPeerDataError';
  constructor(readonly dataDir: string) {
    super(
      `no running peer and no store in ${dataDir}; pass the peer's data folder with --data-dir DIR or AGENTJET_DATA_DIR=DIR` +
        ' (or start a peer there with `agentjet serve`)',
    );
  }
}

/** The data dir a command means: --data-dir, else AGENTJET_DATA_DIR, else the platform's default. */
export function dataDirOf(values: OptionValues, env: NodeJS.ProcessEnv = process.env): string {
  const given = values['data-dir'];
  return typeof given === 'string' && given !== '' ? resolve(given) : defaultDataDir(env);
}

export type PeerAccess =
  /** A peer runs on the data dir: ask it (its control token and URL, read from control.json). */
  | { kind: 'peer'; dataDir: string; client: PeerClient; apiUrl: string; token: string }
  /** No peer runs there, but its store is there: read the file (openOfflineStore). */
  | { kind: 'offline'; dataDir: string; storePath: string };

/** control.json as the peer writes it at start (the fields read here; peer-client.ts reads the same file). */
const controlFileSchema = z.object({ pid: z.number().int().positive(), token: z.string(), urls: z.object({ api: z.string() }) });

/**
 * Running peer or offline store. A control.json whose process is gone (a peer killed with -9 leaves it) counts as
 * no peer, so the store is read directly. Throws NoPeerDataError when there is neither.
 */
export function peerOrOffline(dataDir: string): PeerAccess {
  const paths = dataPaths(dataDir);
  const control = readControlFile(paths.control);
  if (control && processAlive(control.pid)) {
    return { kind: 'peer', dataDir, client: new PeerClient(control.urls.api, control.token), apiUrl: control.urls.api, token: control.token };
  }
  if (existsSync(paths.store)) return { kind: 'offline', dataDir, storePath: paths.store };
  throw new NoPeerDataError(dataDir);
}

/**
 * The data dir's store, read-only (StoreVersionError for a schema newer than this build, or older than
 * `minSchemaVersion`; StoreUnreadableError for a file that is no store; NoPeerDataError when there is none).
 * The caller closes it.
 */
export function openOfflineStore(dataDir: string, options: ReadOnlyStoreOptions = {}): Database {
  const path = dataPaths(dataDir).store;
  if (!existsSync(path)) throw new NoPeerDataError(dataDir);
  return openStoreReadOnly(path, options);
}

function readControlFile(file: string): z.infer<typeof controlFileSchema> | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const parsed = controlFileSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Signal 0 checks existence only; EPERM means it exists under another user. */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
