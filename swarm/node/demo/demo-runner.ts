/**
 * Where the demo's agents run: in the demo's own peer (one process), or in a second peer process on this machine
 * that reaches the model over the swarm (`--two-process`: the server hosts and trains, the client runs the agent
 * scripts; the same split as two lab machines). The demo drives either one through the same few calls.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { AttachClientRequest, ClientRunRecord, ClientStatus } from '../../common/runner-api.ts';
import { PeerClient } from '../cli/peer-client.ts';
import { startPeerProcess, type PeerProcess } from '../cli/peer-process.ts';
import type { ClientRunner } from '../runner/runner.ts';

export interface DemoRunner {
  /** Where the agents run, for the console ("in this process", "in peer process 1234"). */
  readonly where: string;
  attach(request: AttachClientRequest): Promise<void>;
  status(name: string): Promise<ClientStatus>;
  runs(name: string, limit: number): Promise<ClientRunRecord[]>;
  detach(name: string, abortInFlight: boolean): Promise<void>;
  close(): Promise<void>;
}

export function inProcessRunner(runner: ClientRunner): DemoRunner {
  return {
    where: 'in this process',
    attach: async (request) => void (await runner.attach(request)),
    status: async (name) => runner.get(name),
    runs: async (name, limit) => runner.runs(name, limit),
    detach: (name, abortInFlight) => runner.detach(name, { abortInFlight }),
    close: async () => {},
  };
}

export interface ClientPeerOptions {
  /** The client peer's data folder. */
  dataDir: string;
  swarmToken: string;
  /** The server peer's libp2p address (with /p2p/<id>). */
  bootstrap: string;
  /** The models the agents will use: the client waits until the swarm announces them. */
  models: string[];
  timeoutMs?: number;
}

/** Starts `agentjet node` as a second process in the server's swarm and drives its runner over the control API. */
export async function clientPeerProcess(options: ClientPeerOptions): Promise<DemoRunner> {
  mkdirSync(options.dataDir, { recursive: true });
  const peer: PeerProcess = await startPeerProcess([
    'node',
    '--data-dir', options.dataDir,
    '--port', '0',
    '--swarm-token', options.swarmToken,
    '--bootstrap', options.bootstrap,
  ]);
  const api = new PeerClient(peer.ready.apiUrl, peer.ready.token);
  try {
    for (const model of options.models) await waitForModel(api, model, options.timeoutMs ?? 60_000);
  } catch (err) {
    await peer.stop();
    throw err;
  }
  const path = (name: string) => `/clients/${encodeURIComponent(name)}`;
  return {
    where: `in peer process ${peer.child.pid} (${join(options.dataDir)})`,
    attach: async (request) => void (await api.request('POST', '/clients', request)),
    status: (name) => api.get<ClientStatus>(path(name)),
    runs: async (name, limit) => (await api.get<{ runs: ClientRunRecord[] }>(`${path(name)}/runs?limit=${limit}`)).runs,
    detach: async (name, abortInFlight) => void (await api.request('DELETE', `${path(name)}${abortInFlight ? '?abort=1' : ''}`)),
    close: async () => void (await peer.stop()),
  };
}

/** Until a peer of the swarm announces `model` (presence travels over gossip, a second or two). */
async function waitForModel(api: PeerClient, model: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const { peers } = await api.get<{ peers: Array<{ self: boolean; models: Array<{ name: string }> }> }>('/peers');
    if (peers.some((p) => !p.self && p.models.some((m) => m.name === model))) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the client peer did not see the server's model "${model}" in the swarm within ${timeoutMs / 1000} s`);
}

/** Resolves once the client has no work left and nothing in flight (or is paused/broken with nothing in flight). */
export async function settled(runner: DemoRunner, name: string, onTick: () => Promise<void> = async () => {}): Promise<ClientStatus> {
  for (;;) {
    const status = await runner.status(name);
    await onTick();
    if (status.state !== 'running' && status.inFlight === 0) return status;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}
