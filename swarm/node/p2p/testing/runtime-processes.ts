/** Parent side of runtime-process.ts: start peer runtimes as child processes and talk to their HTTP APIs. */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { PeerOptions } from '../../runtime.ts';
import type { RuntimeReady } from './runtime-process.ts';

const script = fileURLToPath(new URL('./runtime-process.ts', import.meta.url));

export interface RuntimeProcess extends RuntimeReady {
  child: ChildProcess;
  /** GET a control-API path (`/api/...`) with the peer's token. */
  get<T>(path: string): Promise<T>;
  /** POST JSON to a path of the peer's port (`/swarm/v1/...`) with the peer's token. */
  post(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Ask the runtime to stop, and wait for the process to exit (killed if it takes too long). */
  stop(): Promise<void>;
  /** SIGKILL: no stop, no final write; resolves once the process is gone. */
  kill(): Promise<void>;
}

export async function startRuntimeProcess(options: PeerOptions): Promise<RuntimeProcess> {
  const child = fork(script, [JSON.stringify(options)], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = once(child, 'exit');
  const ready = await new Promise<RuntimeReady>((resolve, reject) => {
    child.once('message', (message) => resolve(message as RuntimeReady));
    child.once('exit', (code) => reject(new Error(`peer runtime exited with ${code} before it was ready`)));
  });
  const headers = { authorization: `Bearer ${ready.token}`, 'content-type': 'application/json' };
  const base = `http://127.0.0.1:${ready.port}`;
  return {
    ...ready,
    child,
    async get<T>(path: string) {
      const res = await fetch(`${base}${path}`, { headers });
      if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status} ${await res.text()}`);
      return (await res.json()) as T;
    },
    async post(path, body) {
      const res = await fetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
