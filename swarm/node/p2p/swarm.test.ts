/**
 * The swarm end to end: two real peer runtimes in one process (SQLite stores, builtin:tiny in a worker thread on
 * the server peer, libp2p nodes on 127.0.0.1 in one private swarm via a bootstrap address, no mDNS). The client
 * peer hosts nothing; its agents reach the server's model through the client's own /swarm/v1 and /v1.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarmNode, createSwarmToken } from '../../../p2p/index.ts';
import { parseSafetensors } from '../../../worker/checkpoint/safetensors.ts';
import type { CreateEpisodeResponse, SwarmStatusResponse } from '../../common/swarm-api.ts';
import { eventually } from '../../../p2p/testing/nodes.ts';
import { PeerRuntime } from '../runtime.ts';
import { openStore } from '../store/db.ts';
import { getEpisode } from '../store/episode-reads.ts';
import type { FetchedWeights } from './weights-sync.ts';
import type { SwarmPeer } from '../../common/api.ts';

const LOOPBACK = ['/ip4/127.0.0.1/tcp/0'];
const dirs: string[] = [];
let server: PeerRuntime;
let client: PeerRuntime;

function tempDir(name: string) {
  const dir = mkdtempSync(join(tmpdir(), `agentjet-swarm-${name}-`));
  dirs.push(dir);
  return dir;
}

beforeAll(async () => {
  const swarmToken = createSwarmToken({ name: 'lab' });
  server = await PeerRuntime.start({
    dataDir: tempDir('server'),
    port: 0,
    consoleLogLevel: 'silent',
    models: [
      { name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: ['gpt-4o-mini'], poolLimit: 8 },
    ],
    // One group of two episodes makes a training step.
    training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0 } },
    p2p: { swarmToken, listen: LOOPBACK, mdns: false, presenceIntervalMs: 200 },
  });
  client = await PeerRuntime.start({
    dataDir: tempDir('client'),
    port: 0,
    consoleLogLevel: 'silent',
    p2p: {
      swarmToken,
      listen: LOOPBACK,
      mdns: false,
      presenceIntervalMs: 200,
      bootstrap: [server.p2p!.node.multiaddrs()[0]],
      mirror: ['tiny'],
      // Ten minutes, far beyond the test's timeout: a server peer that stops cleanly says goodbye and its
      // episodes end at once, with no grace.
      peerGraceMs: 600_000,
    },
  });
  await until(async () =>
    (await peersOf(client)).some(
      (p) => p.peerId === server.p2p!.node.peerId && p.models.some((m) => m.name === 'tiny'),
    ),
  );
});

afterAll(async () => {
  await Promise.allSettled([client?.stop(), server?.stop()]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  await eventually(check, 50);
}

async function api<T>(peer: PeerRuntime, path: string): Promise<{ status: number; body: T }> {
  const res = await fetch(`${peer.urls.api}${path}`, { headers: { authorization: `Bearer ${peer.token}` } });
  return { status: res.status, body: (await res.json()) as T };
}

async function peersOf(peer: PeerRuntime): Promise<SwarmPeer[]> {
  return (await api<{ peers: SwarmPeer[] }>(peer, '/peers')).body.peers;
}

async function swarmPost(peer: PeerRuntime, path: string, body: unknown) {
  const res = await fetch(`http://127.0.0.1:${peer.port}/swarm/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${peer.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function startRemoteEpisode(taskId: string): Promise<CreateEpisodeResponse> {
  const res = await swarmPost(client, '/episodes', { model: 'tiny', taskId, sampling: { max_tokens: 6 } });
  expect(res.status).toBe(201);
  return res.body as unknown as CreateEpisodeResponse;
}

async function streamedCall(episode: CreateEpisodeResponse): Promise<string> {
  const openai = new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });
  const stream = await openai.chat.completions.create({
    model: 'tiny',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 5,
    stream: true,
  });
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  expect(chunks).toBeGreaterThan(1);
  return text;
}

describe('a client peer without models uses a server peer’s model through the swarm', () => {
  it('reports the swarm in status and /api/peers', async () => {
    const { body: status } = await api<{
      p2p: { enabled: boolean; peerId: string; peers: number; swarm: string };
    }>(client, '/status');
    expect(status.p2p).toMatchObject({ enabled: true, peerId: client.p2p!.node.peerId, swarm: 'lab' });
    expect(status.p2p.peers).toBeGreaterThanOrEqual(1);
    const server = (await peersOf(client)).find((p) => !p.self)!;
    expect(server.roles).toContain('server');
    expect(server.pool.capacity).toBe(8);

    // The runner's view (/swarm/v1/status) lists the swarm's model, aliases included, as if it were local.
    const res = await fetch(`http://127.0.0.1:${client.port}/swarm/v1/status`, {
      headers: { authorization: `Bearer ${client.token}` },
    });
    const swarmStatus = (await res.json()) as SwarmStatusResponse;
    expect(swarmStatus.models).toContainEqual(
      expect.objectContaining({ name: 'tiny', aliases: ['gpt-4o-mini'], source: `swarm:${server.peerId}` }),
    );
  });

  it('streams a remote completion, ends the episode with a reward, and the server stores it', async () => {
    const episode = await startRemoteEpisode('task-1');
    expect(episode.baseUrl).toBe(client.urls.gateway);
    // The episode lives on the server peer, not here.
    expect(getEpisode(client.db, episode.episodeId)).toBeUndefined();
    expect(getEpisode(server.db, episode.episodeId)?.state).toBe('active');

    await streamedCall(episode);
    const ended = await swarmPost(client, `/episodes/${episode.episodeId}/end`, { reward: 0.75 });
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({ episodeId: episode.episodeId, state: 'ended', calls: 1 });
    expect(getEpisode(server.db, episode.episodeId)).toMatchObject({ state: 'ended', reward: 0.75 });

    // The merge view of a peer's episode, fetched over /agentjet/trajectories/1.
    const exported = await api<{ episode: { id: string } }>(
      client,
      `/peers/${server.p2p!.node.peerId}/episodes/${episode.episodeId}`,
    );
    expect(exported.status).toBe(200);
    expect(exported.body.episode.id).toBe(episode.episodeId);
  });

  it('refuses a late result for a remote episode the way a local one is refused', async () => {
    const episode = await startRemoteEpisode('task-late');
    expect(
      (await swarmPost(client, `/episodes/${episode.episodeId}/abort`, { reason: 'agent crashed' })).status,
    ).toBe(200);
    const late = await swarmPost(client, `/episodes/${episode.episodeId}/end`, { reward: 1 });
    expect(late.status).toBe(409);
    expect((late.body.error as { name: string }).name).toBe('ConflictError');
  });

  it('fetches and verifies the weights the server publishes after a training step', async () => {
    const fetched = new Promise<FetchedWeights>((resolve) => {
      client.p2p!.weights.onChange((entry) => {
        if ('path' in entry) resolve(entry);
      });
    });
    const group = [await startRemoteEpisode('task-w'), await startRemoteEpisode('task-w')];
    for (const [i, episode] of group.entries()) {
      await streamedCall(episode);
      expect((await swarmPost(client, `/episodes/${episode.episodeId}/end`, { reward: i })).status).toBe(200);
    }
    const weights = await fetched;
    expect(weights).toMatchObject({
      model: 'tiny',
      version: server.serving.models.find('tiny')!.policyVersion,
      from: server.p2p!.node.peerId,
    });
    const bytes = readFileSync(weights.path);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(weights.sha256);
    const live = await server.serving.models.find('tiny')!.engine.getWeights();
    expect(Object.keys(parseSafetensors(bytes).tensors).sort()).toEqual(Object.keys(live).sort());
    const listed = await api<{ fetched: FetchedWeights[] }>(client, '/p2p/weights');
    expect(listed.body.fetched.map((f) => f.version)).toContain(weights.version);
  });

  it('keeps a peer with the wrong swarm key out', async () => {
    const stranger = await createSwarmNode({
      dataDir: tempDir('stranger'),
      swarm: { name: 'lab', key: 'ab'.repeat(32) },
      listen: LOOPBACK,
      mdns: false,
    });
    try {
      await expect(
        stranger.dial(server.p2p!.node.multiaddrs()[0], { signal: AbortSignal.timeout(10_000) }),
      ).rejects.toMatchObject({ name: 'SwarmKeyMismatchError' });
      expect(stranger.connectedPeers()).not.toContain(server.p2p!.node.peerId);
      expect(stranger.presence.list()).toEqual([]);
    } finally {
      await stranger.stop();
    }
  });

  it('aborts the episode with a clear error for the agent when the server peer stops mid-episode', async () => {
    const episode = await startRemoteEpisode('task-gone');
    await streamedCall(episode);
    const serverStore = server.paths.store;
    const serverPeerId = server.p2p!.node.peerId;
    await server.stop();

    const openai = new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });
    const failure = await openai.chat.completions
      .create({
        model: 'tiny',
        messages: [{ role: 'user', content: 'still there?' }],
        max_tokens: 5,
        stream: true,
      })
      .then(
        () => null,
        (err: unknown) => err,
      );
    expect(failure).toBeInstanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect((failure as InstanceType<typeof OpenAI.APIError>).code).toBe('peer_gone');

    const end = await swarmPost(client, `/episodes/${episode.episodeId}/end`, { reward: 1 });
    expect((end.body.error as { name: string }).name).toBe('PeerGoneError');

    // With its only host gone, a new episode waits for a server (retryable) rather than failing as an unknown model.
    await until(() => !client.p2p!.node.connectedPeers().includes(serverPeerId));
    const next = await swarmPost(client, '/episodes', { model: 'tiny', taskId: 'task-next' });
    expect(next.status).toBe(503);
    expect((next.body.error as { name: string }).name).toBe('NoServerNowError');
    const never = await swarmPost(client, '/episodes', { model: 'never-hosted', taskId: 'task-next' });
    expect(never.status).toBe(404);

    const db = openStore(serverStore);
    try {
      expect(getEpisode(db, episode.episodeId)?.state).toBe('aborted');
    } finally {
      db.close();
    }
  });
});
