/** Parent side of peer-process.ts: start peers as child processes and send them commands. */
import { fork, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { SwarmNodeOptions } from '../node/node.ts';
import type { PeerCommand } from './peer-process.ts';

const script = fileURLToPath(new URL('./peer-process.ts', import.meta.url));

export class PeerCommandError extends Error {
  constructor(
    readonly remoteName: string,
    message: string,
  ) {
    super(message);
    this.name = remoteName;
  }
}

export interface PeerProcess {
  peerId: string;
  multiaddrs: string[];
  child: ChildProcess;
  send<T = unknown>(command: PeerCommand): Promise<T>;
  /** Stop the node and wait for the process to exit. */
  stop(): Promise<void>;
}

export interface PeerProcessOptions extends SwarmNodeOptions {
  roles?: string[];
  /** Run the peer inside this network namespace (`ip netns exec`; needs root). */
  netns?: string;
}

export async function startPeerProcess(options: PeerProcessOptions): Promise<PeerProcess> {
  const { netns, ...nodeOptions } = options;
  const args = [script, JSON.stringify(nodeOptions)];
  const stdio: ['ignore', 'inherit', 'inherit', 'ipc'] = ['ignore', 'inherit', 'inherit', 'ipc'];
  // `ip netns exec` replaces itself with node and keeps the IPC channel's descriptor and environment.
  const child = netns
    ? spawn('ip', ['netns', 'exec', netns, process.execPath, '--import', 'tsx', ...args], { stdio })
    : fork(script, args.slice(1), { execArgv: ['--import', 'tsx'], stdio });
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  let nextId = 0;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = new Promise<{ peerId: string; multiaddrs: string[] }>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`peer process exited with ${code} before it was ready`)));
    child.on('message', (message: { event?: string; id?: number; ok?: boolean; result?: unknown; error?: { name: string; message: string }; peerId?: string; multiaddrs?: string[] }) => {
      if (message.event === 'ready') return resolve({ peerId: message.peerId as string, multiaddrs: message.multiaddrs as string[] });
      const waiter = message.id === undefined ? undefined : pending.get(message.id);
      if (!waiter || message.id === undefined) return;
      pending.delete(message.id);
      if (message.ok) waiter.resolve(message.result);
      else waiter.reject(new PeerCommandError(message.error?.name ?? 'Error', message.error?.message ?? ''));
    });
  });
  const { peerId, multiaddrs } = await ready;
  const peer: PeerProcess = {
    peerId,
    multiaddrs,
    child,
    send<T>(command: PeerCommand) {
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        child.send({ id, ...command });
      });
    },
    async stop() {
      if (child.exitCode !== null || !child.connected) return;
      await peer.send({ cmd: 'stop' }).catch(() => undefined);
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  return peer;
}
