import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { PresenceContent } from '../presence/announcement.ts';
import { generateSwarmKey } from '../swarm-token/token.ts';
import { eventually, testNodes } from '../testing/nodes.ts';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

const content = (roles: string[]): PresenceContent => ({ roles, models: [], pool: { load: 0, capacity: 1 }, clientScripts: [], gateway: { available: false } });

describe('mDNS discovery', () => {
  it('connects two peers of a swarm that were given no address of each other, and they see each other in presence', async () => {
    // A swarm name of its own: the mDNS service tag is per swarm, so peers of other runs on this machine stay out.
    const swarm = { name: `mdns-${randomBytes(4).toString('hex')}`, key: generateSwarmKey() };
    const server = await nodes.start({ swarm, mdns: true });
    const client = await nodes.start({ swarm, mdns: true });
    await server.presence.setContent(() => content(['server']));
    await client.presence.setContent(() => content(['client']));
    await eventually(() => server.connectedPeers().includes(client.peerId) && client.connectedPeers().includes(server.peerId), 50);
    const seen = await eventually(() => client.presence.get(server.peerId), 50);
    expect(seen.announcement.roles).toEqual(['server']);
    expect((await eventually(() => server.presence.get(client.peerId), 50)).announcement.roles).toEqual(['client']);
  });
});
