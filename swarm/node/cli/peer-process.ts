/**
 * Starts the real `agentjet` CLI as a child process and waits for its JSON ready line: the demo's client peer in
 * `--two-process` mode, and integration tests that need a peer in another process (kill -9, CLI behaviour).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { PeerReadyLine } from '../../common/api.ts';

export const AGENTJET_BIN = fileURLToPath(new URL('../../../bin/agentjet.mjs', import.meta.url));

export type ReadyLine = PeerReadyLine;

export interface PeerProcess {
  child: ChildProcess;
  ready: ReadyLine;
  stderr: () => string;
  /** SIGTERM and wait for exit; returns the exit code. */
  stop(): Promise<number | null>;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

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

/** Starts `agentjet <command> --json …` and resolves once it printed its ready line. */
export async function startPeerProcess(args: string[], timeoutMs = 60_000): Promise<PeerProcess> {
  const child = spawn(process.execPath, [AGENTJET_BIN, ...args, '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const ready = await new Promise<ReadyLine>((resolve, reject) => {
    let buffered = '';
    const timer = setTimeout(() => reject(new Error(`peer not ready after ${timeoutMs} ms; stderr:\n${stderr}`)), timeoutMs);
    child.stdout!.on('data', (d) => {
      buffered += d;
      for (const line of buffered.split('\n')) {
        if (line.startsWith('{') && line.includes('"ready"')) {
          clearTimeout(timer);
          resolve(JSON.parse(line) as ReadyLine);
        }
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`peer exited with ${code} before ready; stderr:\n${stderr}`));
    });
  });
  return {
    child,
    ready,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      return code;
    },
  };
}
