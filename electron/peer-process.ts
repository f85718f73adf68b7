/**
 * Runs the peer runtime (`bin/agentjet.mjs node --json --port 0`) as a child process and waits for its ready
 * line. Used by the Electron shell (with Electron's own Node, ELECTRON_RUN_AS_NODE=1) and by the e2e tests
 * (with plain Node). Knows nothing about Electron.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { PeerReadyLine } from '../swarm/common/api.ts';

/** The `--json` ready line of `agentjet node`. */
export type PeerReady = PeerReadyLine;

export interface PeerProcess extends PeerReady {
  child: ChildProcessWithoutNullStreams;
  /** Everything the peer wrote to stderr so far (its human log). */
  stderr(): string;
  /** SIGTERM, then SIGKILL after a grace period. Safe to call twice; resolves when the process is gone. */
  stop(): Promise<void>;
}

export interface PeerProcessOptions {
  /** The repository (or packaged app) root holding `bin/agentjet.mjs`. */
  appRoot: string;
  /** The Node executable: `process.execPath` (Node, or Electron with ELECTRON_RUN_AS_NODE=1). */
  execPath: string;
  dataDir?: string;
  port?: number;
  extraArgs?: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Each stderr line, as it arrives (the shell forwards them to its own log). */
  onStderrLine?: (line: string) => void;
  readyTimeoutMs?: number;
}

export class PeerStartError extends Error {
  override readonly name = 'PeerStartError';
}

/** The first start compiles TypeScript through tsx and migrates SQLite: seconds on a busy laptop. */
const DEFAULT_READY_TIMEOUT_MS = 60_000;
/** How long SIGTERM gets before SIGKILL: the peer closes SQLite, workers and libp2p in well under this. */
const STOP_GRACE_MS = 10_000;
/** Keep the tail of stderr only: a peer running for days must not grow the shell's memory. */
const STDERR_KEEP_CHARS = 64_000;

export async function startPeerProcess(options: PeerProcessOptions): Promise<PeerProcess> {
  const args = [path.join(options.appRoot, 'bin', 'agentjet.mjs'), 'node', '--json', '--port', String(options.port ?? 0)];
  if (options.dataDir) args.push('--data-dir', options.dataDir);
  args.push(...(options.extraArgs ?? []));
  const child = spawn(options.execPath, args, { cwd: options.appRoot, env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });

  let stderr = '';
  createInterface({ input: child.stderr }).on('line', (line) => {
    stderr = `${stderr}${line}\n`.slice(-STDERR_KEEP_CHARS);
    options.onStderrLine?.(line);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await waitForReady(child, () => stderr, options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);

  let stopping: Promise<void> | null = null;
  return {
    ...ready,
    child,
    stderr: () => stderr,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        child.kill('SIGTERM');
        const killTimer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        await exited;
        clearTimeout(killTimer);
      })();
      return stopping;
    },
  };
}

function waitForReady(child: ChildProcessWithoutNullStreams, stderr: () => string, timeoutMs: number): Promise<PeerReady> {
  return new Promise((resolve, reject) => {
    // Reading continues after the ready line: stdout must be drained or the peer would block on a full pipe.
    const lines = createInterface({ input: child.stdout });
    const fail = (why: string, cause?: unknown) => {
      clearTimeout(timer);
      child.off('exit', onEarlyExit);
      child.kill('SIGKILL');
      reject(new PeerStartError(`${why}\n--- peer stderr ---\n${stderr()}`, { cause }));
    };
    const onEarlyExit = (code: number | null, signal: string | null) => fail(`The peer exited before it was ready (code ${code}, signal ${signal})`);
    const timer = setTimeout(() => fail(`The peer printed no ready line within ${timeoutMs} ms`), timeoutMs);
    child.once('exit', onEarlyExit);
    child.once('error', (error) => fail(`The peer could not be started: ${error.message}`, error));
    lines.on('line', (line) => {
      const ready = parseReadyLine(line);
      if (!ready) return;
      clearTimeout(timer);
      child.off('exit', onEarlyExit);
      resolve(ready);
    });
  });
}

/** The ready message if `line` is one; null for any other line (human log lines, other events). */
export function parseReadyLine(line: string): PeerReady | null {
  if (!line.startsWith('{')) return null;
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return null;
  }
  const ready = message as Partial<PeerReady>;
  if (ready.event !== 'ready' || typeof ready.uiUrl !== 'string' || typeof ready.port !== 'number' || typeof ready.token !== 'string') return null;
  return ready as PeerReady;
}
