/**
 * A swarm that heals: a server peer (builtin:tiny) and a client peer whose attached script uses the model through
 * the swarm, each in its own process, on loopback. Once the client's runs are ending, the server is killed with
 * SIGKILL and started again on the same data dir and the same libp2p port. Figures: whether the client resumed by
 * itself (a run that began after the server was back ended), how long after the server's return, and whether the
 * client's circuit breaker tripped meanwhile (it must not: a missing server is the swarm's trouble, not the
 * script's).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSwarmToken } from '../../../../p2p/index.ts';
import type { ClientRunRecord, ClientStatus } from '../../../common/runner-api.ts';
import type { PeersResponse } from '../../../common/api.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../p2p/testing/runtime-processes.ts';
import type { PeerOptions } from '../../runtime.ts';

/** How long the client has to resume after the server is back (the hardening issue's target). */
const RESUME_TARGET_S = 10;
/** Waits for what must happen within a bounded time; past it the figure says it did not happen. */
const WAIT_LIMIT_MS = 60_000;
const POLL_MS = 200;
/** Presence every 200 ms: the client notices the server's comings and goings within a second. */
const PRESENCE_INTERVAL_MS = 200;

/** One call to the model, then a reward: a script that works whenever a server answers. */
const SCRIPT = `const res = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { authorization: 'Bearer ' + process.env.OPENAI_API_KEY, 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'Say hi.' }], max_tokens: 2 }),
});
if (!res.ok) { console.error('model call failed', res.status); process.exit(1); }
console.log(JSON.stringify({ reward: 1 }));
`;

export interface ServerRestartFigures {
  client_resumed_after_server_restart: boolean;
  client_resume_s: number | null;
  client_breaker_tripped: boolean;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitFor<T>(check: () => Promise<T | undefined>): Promise<T | undefined> {
  const deadline = Date.now() + WAIT_LIMIT_MS;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return undefined;
}

export async function runServerRestartChaos(): Promise<ServerRestartFigures> {
  const dirs = [mkdtempSync(join(tmpdir(), 'agentjet-chaos-server-')), mkdtempSync(join(tmpdir(), 'agentjet-chaos-client-'))];
  const swarmToken = createSwarmToken({ name: 'chaos-restart' });
  const serverOptions: PeerOptions = {
    dataDir: dirs[0],
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
    training: { autoStart: false },
    p2p: { swarmToken, listen: [`/ip4/127.0.0.1/tcp/${await freePort()}`], mdns: false, presenceIntervalMs: PRESENCE_INTERVAL_MS },
  };
  const peers: RuntimeProcess[] = [];
  try {
    let server = await startRuntimeProcess(serverOptions);
    peers.push(server);
    const client = await startRuntimeProcess({
      dataDir: dirs[1],
      port: 0,
      consoleLogLevel: 'silent',
      roles: ['client'],
      p2p: { swarmToken, listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false, presenceIntervalMs: PRESENCE_INTERVAL_MS, bootstrap: [server.addresses[0]] },
    });
    peers.push(client);
    await waitFor(async () => {
      const { peers: seen } = await client.get<PeersResponse>('/api/peers');
      return seen.some((p) => p.peerId === server.peerId && p.connected && p.models.some((m) => m.name === 'tiny')) || undefined;
    });
    const attached = await client.post('/api/clients', {
      name: 'steady',
      script: { content: SCRIPT, filename: 'agent.mjs' },
      tasks: { inline: [{ id: 't1' }, { id: 't2' }] },
      model: 'tiny',
      concurrency: 2,
      retries: 0,
      maxConsecutiveFailures: 3,
    });
    if (attached.status !== 200 && attached.status !== 201) throw new Error(`attach refused: ${JSON.stringify(attached.body)}`);
    const runs = () => client.get<{ runs: ClientRunRecord[] }>('/api/clients/steady/runs').then((r) => r.runs);
    await waitFor(async () => ((await runs()).filter((r) => r.status === 'ended').length >= 3 ? true : undefined));

    await server.kill();
    peers.splice(peers.indexOf(server), 1);
    server = await startRuntimeProcess(serverOptions);
    peers.push(server);
    const back = Date.now();
    const resumed = await waitFor(async () => {
      const ended = (await runs()).find((r) => r.status === 'ended' && Date.parse(r.startedAt) >= back);
      return ended ? Date.parse(ended.endedAt ?? ended.startedAt) : undefined;
    });
    const status = await client.get<ClientStatus>('/api/clients/steady');
    const resumeS = resumed === undefined ? null : Math.round((resumed - back) / 100) / 10;
    return {
      client_resumed_after_server_restart: resumeS !== null && resumeS <= RESUME_TARGET_S,
      client_resume_s: resumeS,
      client_breaker_tripped: status.state === 'broken',
    };
  } finally {
    await Promise.allSettled(peers.map((p) => p.stop()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
