/**
 * The staleness bound of asynchronous training across the swarm: a train begin beyond it is held by the server
 * (not refused with a 429 that parks the script) whether it comes to the server peer's own /swarm/v1 with the swarm
 * on (the relay's route) or from a client peer without the model (relayed over /agentjet/episode/1), and is admitted
 * once an episode leaves. Two real peers in this process, on loopback.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createSwarmToken } from '../../../p2p/index.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { swarmPost, TINY_MODEL, untilHeard } from './testing/replica-peers.ts';

const LOOPBACK = ['/ip4/127.0.0.1/tcp/0'];
/** The deadline of waiting for a begin to reach the server's gate: generous on a loaded machine. */
const UNTIL_HELD = { timeout: 15_000, interval: 20 };

const dirs: string[] = [];
let server: PeerRuntime;
let client: PeerRuntime;

beforeAll(async () => {
  const swarmToken = createSwarmToken({ name: 'lab' });
  const dataDir = (name: string) => {
    const dir = mkdtempSync(join(tmpdir(), `agentjet-remote-admission-${name}-`));
    dirs.push(dir);
    return dir;
  };
  server = await PeerRuntime.start({
    dataDir: dataDir('server'),
    port: 0,
    consoleLogLevel: 'silent',
    models: [TINY_MODEL],
    // η = 1: two batches of one group of two, four train episodes in flight at most.
    training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0, staleness: 1, train: { loss: 'decoupled-ppo' } } },
    p2p: { swarmToken, listen: LOOPBACK, mdns: false, presenceIntervalMs: 200 },
  });
  client = await PeerRuntime.start({
    dataDir: dataDir('client'),
    port: 0,
    consoleLogLevel: 'silent',
    p2p: { swarmToken, listen: LOOPBACK, mdns: false, presenceIntervalMs: 200, bootstrap: [server.p2p!.node.multiaddrs()[0]] },
  });
  await untilHeard(client, server);
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([client?.stop(), server?.stop()]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('a train begin beyond the staleness bound, across the swarm', () => {
  it('is held by the server, from its own route and from a client peer, and admitted when episodes leave', async () => {
    const model = server.serving.models.find('tiny')!;
    const begin = (peer: PeerRuntime, taskId: string) => swarmPost(peer, '/episodes', { model: 'tiny', taskId, sampling: { max_tokens: 4 } });

    // The bound: four train episodes, two begun through the client peer.
    const filled = await Promise.all([begin(server, 'task-a'), begin(server, 'task-a'), begin(client, 'task-b'), begin(client, 'task-b')]);
    for (const answer of filled) expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    const [a1, , b1] = filled.map((answer) => answer.body as unknown as CreateEpisodeResponse);
    expect(model.activeTrainEpisodes).toBe(4);

    // One more from each side: both wait at the server's gate instead of being refused.
    const fromServer = begin(server, 'task-c');
    const fromClient = begin(client, 'task-c');
    await vi.waitFor(() => expect(model.heldAdmissionCount).toBe(2), UNTIL_HELD);

    // Two episodes leave (one through each peer): the held begins go in, and no train begin was refused.
    expect((await swarmPost(server, `/episodes/${a1.episodeId}/abort`, { reason: 'the agent gave up' })).status).toBe(200);
    expect((await swarmPost(client, `/episodes/${b1.episodeId}/abort`, { reason: 'the agent gave up' })).status).toBe(200);
    const admitted = await Promise.all([fromServer, fromClient]);
    for (const answer of admitted) expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    expect(model.heldAdmissionCount).toBe(0);
    expect(model.activeTrainEpisodes).toBe(4);
  });
});
