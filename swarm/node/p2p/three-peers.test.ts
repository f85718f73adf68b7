/**
 * The swarm as the spec draws it, three peers in three processes on loopback, found by mDNS (no addresses
 * given): a server peer that hosts builtin:tiny and trains it, a client peer without models whose agent calls
 * the model through its own gateway with the official `openai` client (streamed through the relay), and a
 * mirror peer that fetches and verifies the weights the server publishes after the training step.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarmToken } from '../../../p2p/index.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import type { PeerOptions } from '../runtime.ts';
import type { SwarmPeer } from '../../common/api.ts';
import { startRuntimeProcess, type RuntimeProcess } from './testing/runtime-processes.ts';
import { eventually } from '../../../p2p/testing/nodes.ts';
import type { FetchedWeights, PublishedWeights } from './weights-sync.ts';

const dirs: string[] = [];
let server: RuntimeProcess;
let client: RuntimeProcess;
let mirror: RuntimeProcess;

beforeAll(async () => {
  // A swarm of its own: mDNS service tags are per swarm name, so other runs on this machine stay out.
  const swarmToken = createSwarmToken({ name: `three-${randomBytes(4).toString('hex')}` });
  const peer = (name: string, options: Partial<PeerOptions> & { mirror?: string[] }): PeerOptions => {
    const dataDir = mkdtempSync(join(tmpdir(), `agentjet-three-${name}-`));
    dirs.push(dataDir);
    const { mirror: mirrored, ...rest } = options;
    return {
      dataDir,
      port: 0,
      consoleLogLevel: 'error',
      p2p: { swarmToken, listen: ['/ip4/127.0.0.1/tcp/0'], mdns: true, presenceIntervalMs: 200, mirror: mirrored },
      ...rest,
    };
  };
  [server, client, mirror] = await Promise.all([
    startRuntimeProcess(
      peer('server', {
        models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 4 }],
        // One group of two episodes makes a training step.
        training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0 } },
      }),
    ),
    startRuntimeProcess(peer('client', {})),
    startRuntimeProcess(peer('mirror', { mirror: ['tiny'] })),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([client?.stop(), mirror?.stop(), server?.stop()]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const until = <T>(check: () => Promise<T | undefined | false>): Promise<T> => eventually(check, 100);

describe('three peers in three processes', () => {
  it('discover each other, relay a streamed completion, train on the server and mirror the new weights', async () => {
    // Discovery and presence: the client sees both others, connected, and the server's model.
    const peers = await until(async () => {
      const list = (await client.get<{ peers: SwarmPeer[] }>('/api/peers')).peers;
      const serverView = list.find((p) => p.peerId === server.peerId);
      const ok = serverView?.connected && serverView.models.some((m) => m.name === 'tiny') && list.some((p) => p.peerId === mirror.peerId && p.connected);
      return ok && list;
    });
    expect(peers.find((p) => p.self)?.peerId).toBe(client.peerId);

    // Two episodes of one group, begun through the client peer; the agent streams through the client's gateway.
    const rewards = [0, 1];
    for (const reward of rewards) {
      const created = await client.post('/swarm/v1/episodes', { model: 'tiny', taskId: 'task-3p', sampling: { max_tokens: 4 } });
      expect(created, JSON.stringify(created.body)).toMatchObject({ status: 201 });
      const episode = created.body as unknown as CreateEpisodeResponse;
      expect(episode.baseUrl).toBe(client.gatewayUrl);
      const openai = new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });
      const stream = await openai.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, stream: true });
      let chunks = 0;
      for await (const chunk of stream) chunks += chunk.choices.length > 0 ? 1 : 0;
      expect(chunks).toBeGreaterThan(1);
      expect((await client.post(`/swarm/v1/episodes/${episode.episodeId}/end`, { reward })).status).toBe(200);
    }

    // The server trains one step and publishes the new policy's weights...
    const published = await until(async () => (await server.get<{ published: PublishedWeights[] }>('/api/p2p/weights')).published.find((p) => p.model === 'tiny'));
    expect(published.version).toBeGreaterThan(0);
    // ...which the mirror fetches, verifies and keeps: the same bytes, from the server.
    const fetched = await until(async () =>
      (await mirror.get<{ fetched: FetchedWeights[] }>('/api/p2p/weights')).fetched.find((f) => f.model === 'tiny' && f.version === published.version),
    );
    expect(fetched).toMatchObject({ sha256: published.sha256, bytes: published.bytes, from: server.peerId });
    expect(createHash('sha256').update(readFileSync(fetched.path)).digest('hex')).toBe(published.sha256);
  }, 120_000);
});
