/**
 * Remote episodes through a short disconnect: two real libp2p nodes on loopback, the server node answering
 * /agentjet/episode/1 the way a server peer's runtime does (begin mints an episode, end/abort settle it).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { generateSwarmKey } from '../../../p2p/swarm-token/token.ts';
import { eventually, testNodes } from '../../../p2p/testing/nodes.ts';
import type { SwarmNode } from '../../../p2p/index.ts';
import { createLogger } from '../log.ts';
import { RemoteEpisodes } from './remote-episodes.ts';
import { EpisodeRpc } from './wire.ts';

const nodes = testNodes();
let remote: RemoteEpisodes | undefined;
afterEach(async () => {
  remote?.close();
  await nodes.cleanup();
});

/** A server node hosting "tiny", a connected client node, and the client's registry with the given grace. */
async function serverAndClient(graceMs: number) {
  const swarm = { name: 'lab', key: generateSwarmKey() };
  const server = await nodes.start({ swarm });
  const client = await nodes.start({ swarm });
  const received: EpisodeRpc[] = [];
  server.episode.handle(async (message) => {
    const rpc = EpisodeRpc.parse(message);
    received.push(rpc);
    if (rpc.type === 'begin') return { ok: true, result: { episodeId: 'ep-1', apiKey: 'key-1', model: 'tiny', policyVersion: 1 } };
    return { ok: true, result: { episodeId: rpc.episodeId, state: rpc.type === 'end' ? 'ended' : 'aborted' } };
  });
  await server.presence.setContent(() => ({
    roles: ['server'],
    models: [{ name: 'tiny', policyVersion: 1 }],
    pool: { load: 0, capacity: 4 },
    clientScripts: [],
    gateway: { available: true },
  }));
  await client.dial(server.multiaddrs()[0]);
  const registry = new RemoteEpisodes(client, createLogger({ consoleLevel: 'silent' }), { graceMs });
  remote = registry;
  await eventually(() => registry.candidates('tiny').length > 0);
  const episode = await registry.begin({ model: 'tiny', taskId: 'task-1' } as Parameters<RemoteEpisodes['begin']>[0]);
  return { server, client, registry, episode, received };
}

const dropConnection = async (client: SwarmNode, server: SwarmNode) => client.libp2p.hangUp(server.libp2p.peerId);

describe('remote episodes across a short disconnect', () => {
  it('keep the episode when the server peer is back within the grace period', async () => {
    const { server, client, registry, episode, received } = await serverAndClient(30_000);
    await dropConnection(client, server);
    await eventually(() => registry.isAway(episode));
    expect(episode.gone).toBeUndefined();

    // The runner's end arrives during the drop: it waits for the reconnection and then reaches the server.
    const ended = await registry.end(episode, { reward: 1 });
    expect(ended).toMatchObject({ episodeId: 'ep-1', state: 'ended' });
    expect(registry.isAway(episode)).toBe(false);
    expect(client.connectedPeers()).toContain(server.peerId);
    expect(received.map((rpc) => rpc.type)).toEqual(['begin', 'end']);
  });

  it('abort it with peer_gone when the server peer is not back within the grace period', async () => {
    const { server, registry, episode, received } = await serverAndClient(500);
    // The server goes silent without a goodbye, as a crashed peer would.
    server.presence.stop();
    await server.stop();
    const ending = registry.end(episode, { reward: 1 });
    await expect(ending).rejects.toMatchObject({ name: 'PeerGoneError', status: 502, details: { code: 'peer_gone' } });
    expect(episode.gone).toMatch(/disconnected/);
    expect(registry.isAway(episode)).toBe(false);
    // Later calls fail at once, the same way.
    await expect(registry.reachable(episode)).rejects.toMatchObject({ name: 'PeerGoneError' });
    expect(received.map((rpc) => rpc.type)).toEqual(['begin']);
  });

  it('end at once with peer_gone when the server peer stops cleanly (it said goodbye: no grace)', async () => {
    // Ten minutes of grace, far beyond this test's timeout: only the goodbye can end the episode in time.
    const { server, registry, episode, received } = await serverAndClient(600_000);
    await server.stop();
    const tracked = registry.findById(episode.episodeId)!;
    await eventually(() => tracked.gone);
    expect(tracked.gone).toMatch(/goodbye/);
    expect(registry.isAway(episode)).toBe(false);
    await expect(registry.end(episode, { reward: 1 })).rejects.toMatchObject({ name: 'PeerGoneError', status: 502, details: { code: 'peer_gone' } });
    expect(received.map((rpc) => rpc.type)).toEqual(['begin']);
  }, 30_000);
});
