import { afterEach, describe, expect, it } from 'vitest';
import { generateSwarmKey } from '../swarm-token/token.ts';
import { eventually, testNodes } from '../testing/nodes.ts';
import type { SwarmKeyMismatch } from './swarm-key-check.ts';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

describe('a peer with another swarm key', () => {
  it('stays out, and both sides are told', async () => {
    const seen: Record<'server' | 'joiner', SwarmKeyMismatch[]> = { server: [], joiner: [] };
    const server = await nodes.start({ swarm: { name: 'lab', key: generateSwarmKey() }, onKeyMismatch: (m) => seen.server.push(m) });
    const joiner = await nodes.start({ swarm: { name: 'lab', key: generateSwarmKey() }, onKeyMismatch: (m) => seen.joiner.push(m) });
    await expect(joiner.dial(server.multiaddrs()[0])).rejects.toBeInstanceOf(Error);
    await eventually(() => seen.server.length > 0 && seen.joiner.length > 0, { what: 'a key mismatch reported on both sides' });
    expect(seen.joiner[0].direction).toBe('outbound');
    expect(seen.server[0].direction).toBe('inbound');
    expect(joiner.connectedPeers()).not.toContain(server.peerId);
    expect(server.connectedPeers()).not.toContain(joiner.peerId);
  });

  it('peers of one key connect and report nothing', async () => {
    const key = generateSwarmKey();
    const mismatches: SwarmKeyMismatch[] = [];
    const server = await nodes.start({ swarm: { name: 'lab', key }, onKeyMismatch: (m) => mismatches.push(m) });
    const joiner = await nodes.start({ swarm: { name: 'lab', key }, onKeyMismatch: (m) => mismatches.push(m) });
    expect(await joiner.dial(server.multiaddrs()[0])).toBe(server.peerId);
    server.episode.handle(async () => ({ ok: true }));
    expect(await joiner.episode.request(server.peerId, {})).toEqual({ ok: true });
    expect(mismatches).toEqual([]);
  });
});
