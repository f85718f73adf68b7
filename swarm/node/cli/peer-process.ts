/**
 * Starts the real `agentjet` CLI as a child process and waits for its JSON ready line. The one home of that: the
 * Electron shell (electron/peer-process.ts, with Electron's own Node and ELECTRON_RUN_AS_NODE=1), the e2e tests,
 * the demo's client peer in `--two-process` mode, and integration tests that need a peer in another process
 * (kill -9, CLI behaviour) all start their peer here.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { PeerReadyLine } from '../../common/api.ts';

export const AGENTJET_BIN = fileURLToPath(new URL('../../../bin/agentjet.mjs', import.meta.url));

export interface PeerProcess {
  child: ChildProcessByStdio<null, Readable, Readable>;
  ready: PeerReadyLine;
  /** The tail of what the peer wrote to stderr so far (its human log). */
  stderr(): string;
  /** SIGTERM, then SIGKILL after a grace period; resolves with the exit code once the process is gone. Safe twice. */
  stop(): Promise<number | null>;
}

export interface PeerProcessOptions {
  /** The Node executable: `process.execPath` (Node, or Electron with ELECTRON_RUN_AS_NODE=1). */
  execPath?: string;
  /** The CLI entry; a packaged app passes its own copy. */
  bin?: string;
  cwd?: string;
  /** The whole environment of the child (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** Each stderr line, as it arrives (the shell forwards them to its own log). */
  onStderrLine?: (line: string) => void;
  readyTimeoutMs?: number;
}

export class PeerStartError extends Error {
  override readonly name = 'PeerStartError';
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The first start compiles TypeScript through tsx and migrates SQLite: seconds on a busy laptop. */
const DEFAULT_READY_TIMEOUT_MS = 60_000;
/** How long SIGTERM gets before SIGKILL: the peer closes SQLite, workers and libp2p in well under this. */
const STOP_GRACE_MS = 10_000;
/** Keep the tail of stderr only: a peer running for days must not grow its parent's memory. */
const STDERR_KEEP_CHARS = 64_000;

/** Runs the CLI to completion. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  const child = spawn(process.execPath, [AGENTJET_BIN, ...args], { env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/**
 * Starts `agentjet <command> … --json` and resolves once it printed its ready line; rejects with PeerStartError
 * (carrying the peer's stderr) if it exits, cannot be spawned, or stays silent past the timeout.
 */
export async function startPeerProcess(args: readonly string[], options: PeerProcessOptions = {}): Promise<PeerProcess> {
  const child = spawn(options.execPath ?? process.execPath, [options.bin ?? AGENTJET_BIN, ...args, '--json'], {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });

  let stderr = '';
  createInterface({ input: child.stderr }).on('line', (line) => {
    stderr = `${stderr}${line}\n`.slice(-STDERR_KEEP_CHARS);
    options.onStderrLine?.(line);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = await waitForReady(child, () => stderr, options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);

  let stopping: Promise<number | null> | null = null;
  return {
    child,
    ready,
    stderr: () => stderr,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
        child.kill('SIGTERM');
        const killTimer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        const code = await exited;
        clearTimeout(killTimer);
        return code;
      })();
      return stopping;
    },
  };
}

function waitForReady(child: PeerProcess['child'], stderr: () => string, timeoutMs: number): Promise<PeerReadyLine> {
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
export function parseReadyLine(line: string): PeerReadyLine | null {
  if (!line.startsWith('{')) return null;
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return null;
  }
  const ready = message as Partial<PeerReadyLine>;
  if (ready.event !== 'ready' || typeof ready.uiUrl !== 'string' || typeof ready.port !== 'number' || typeof ready.token !== 'string') return null;
  return ready as PeerReadyLine;
}
