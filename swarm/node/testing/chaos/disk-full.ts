/**
 * A full disk under a running peer: its data dir on a small tmpfs (mounting needs root or CAP_SYS_ADMIN; otherwise
 * the section is skipped with the reason), the disk filled to the last byte, then writes asked for. The peer must
 * not die, must answer writes with 507 InsufficientStorageError, keep serving reads, and take writes again once
 * space is freed.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRuntimeProcess, type RuntimeProcess } from '../../p2p/testing/runtime-processes.ts';

/** Room for the store, its WAL, the logs and the identity of an idle peer, and little more. */
const TMPFS_SIZE = '8m';
/** Writes asked for while the disk is full (each must be refused with 507, none may crash the peer). */
const WRITES_WHILE_FULL = 20;
/** Filler written in pieces of this size until the disk refuses more. */
const FILL_CHUNK_BYTES = 64 * 1024;

export interface DiskFullFigures {
  disk_full_crash: boolean | null;
  disk_full_writes: number;
  disk_full_507: number;
  disk_full_other_5xx: number;
  disk_full_reads_ok: boolean | null;
  disk_full_recovered: boolean | null;
  disk_full_skipped?: string;
}

function mountTmpfs(dir: string): string | null {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_SIZE}`, 'tmpfs', dir], { stdio: 'pipe' });
    return null;
  } catch (err) {
    return `cannot mount a tmpfs here (${String((err as { stderr?: Buffer }).stderr ?? err).trim() || 'not permitted'}); run as root to include this section`;
  }
}

/** Fills the file system holding `path` to the last byte. */
function fill(path: string): void {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(FILL_CHUNK_BYTES, 1);
  try {
    for (let size = FILL_CHUNK_BYTES; size >= 1; size = Math.floor(size / 2)) {
      for (;;) {
        try {
          writeSync(fd, chunk, 0, size);
        } catch {
          break;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
}

export async function runDiskFullChaos(): Promise<DiskFullFigures> {
  const figures: DiskFullFigures = {
    disk_full_crash: null,
    disk_full_writes: 0,
    disk_full_507: 0,
    disk_full_other_5xx: 0,
    disk_full_reads_ok: null,
    disk_full_recovered: null,
  };
  const mountPoint = mkdtempSync(join(tmpdir(), 'agentjet-chaos-disk-'));
  const skipped = mountTmpfs(mountPoint);
  if (skipped) {
    rmSync(mountPoint, { recursive: true, force: true });
    return { ...figures, disk_full_skipped: skipped };
  }
  let peer: RuntimeProcess | undefined;
  try {
    peer = await startRuntimeProcess({
      dataDir: join(mountPoint, 'peer'),
      port: 0,
      consoleLogLevel: 'silent',
      models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: WRITES_WHILE_FULL + 2 }],
      training: { autoStart: false },
    });
    const exited = new Promise<void>((resolve) => peer!.child.once('exit', () => resolve()));
    let crashed = false;
    void exited.then(() => (crashed = true));
    const filler = join(mountPoint, 'filler');
    fill(filler);
    for (let i = 0; i < WRITES_WHILE_FULL; i++) {
      const begun = await peer.post('/swarm/v1/episodes', { model: 'tiny', taskId: `full-${i}` }).catch(() => null);
      figures.disk_full_writes++;
      if (begun?.status === 507) figures.disk_full_507++;
      else if (begun && begun.status >= 500) figures.disk_full_other_5xx++;
    }
    figures.disk_full_reads_ok = await peer
      .get('/api/status')
      .then(() => true)
      .catch(() => false);
    rmSync(filler, { force: true });
    const after = await peer.post('/swarm/v1/episodes', { model: 'tiny', taskId: 'after' }).catch(() => null);
    figures.disk_full_recovered = after?.status === 201;
    figures.disk_full_crash = crashed;
  } finally {
    await peer?.stop();
    try {
      execFileSync('umount', [mountPoint], { stdio: 'pipe' });
    } catch {
      // Left mounted if still busy; the next run uses another folder.
    }
    rmSync(mountPoint, { recursive: true, force: true });
  }
  return figures;
}
