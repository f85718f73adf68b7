import { afterEach, describe, expect, it } from 'vitest';
import { generateSwarmKey } from '../swarm-token/token.ts';
import { eventually, testNodes } from '../testing/nodes.ts';
import type { PresenceContent } from './announcement.ts';
import type { PresenceEntry, PresenceLeave } from './presence.ts';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

function content(load: number, policyVersion = 1): PresenceContent {
  return {
    roles: ['server'],
    models: [{ name: 'tiny', policyVersion }],
    pool: { load, capacity: 4 },
    clientScripts: ['examples/echo.py'],
    gateway: { available: true },
  };
}

describe('presence', () => {
  it('reports joins, updates and the leave of a peer that goes silent', async () => {
    const swarm = { name: 'lab', key: generateSwarmKey() };
    const a = await nodes.start({ swarm });
    const b = await nodes.start({ swarm });
    const c = await nodes.start({ swarm });
    const events: Array<[string, PresenceEntry]> = [];
    for (const kind of ['join', 'update', 'leave'] as const) a.presence.on(kind, (entry) => events.push([kind, entry]));
    await a.presence.setContent(() => content(0));
    let bLoad = 1;
    await b.presence.setContent(() => content(bLoad));
    await c.presence.setContent(() => content(2));
    // b and c only know a: presence reaches them and a through gossip.
    await b.dial(a.multiaddrs()[0]);
    await c.dial(a.multiaddrs()[0]);

    await eventually(() => a.presence.list().length === 2);
    expect(a.presence.get(b.peerId)?.announcement).toMatchObject({ peerId: b.peerId, roles: ['server'], pool: { load: 1, capacity: 4 } });
    expect(events.filter(([kind]) => kind === 'join').map(([, e]) => e.peerId).sort()).toEqual([b.peerId, c.peerId].sort());
    await eventually(() => b.presence.get(c.peerId));

    bLoad = 3;
    await b.presence.announceNow();
    await eventually(() => a.presence.get(b.peerId)?.announcement.pool.load === 3);
    expect(events.some(([kind, e]) => kind === 'update' && e.peerId === b.peerId)).toBe(true);

    // c goes silent without a goodbye (as a crashed peer would): it expires.
    c.presence.stop();
    const left = await eventually(() => events.find(([kind]) => kind === 'leave'));
    expect(left[1].peerId).toBe(c.peerId);
    expect((left[1] as PresenceLeave).reason).toBe('expired');
    expect(a.presence.list().map((e) => e.peerId)).toEqual([b.peerId]);
  });

  it('drops a peer that says goodbye at once, long before it would expire', async () => {
    const swarm = { name: 'lab', key: generateSwarmKey() };
    // An hour of TTL: only the goodbye can remove b within this test's timeout.
    const a = await nodes.start({ swarm, presence: { intervalMs: 200, ttlMs: 3_600_000 } });
    const b = await nodes.start({ swarm });
    const leaves: PresenceLeave[] = [];
    a.presence.on('leave', (entry) => leaves.push(entry));
    await a.presence.setContent(() => content(0));
    await b.presence.setContent(() => content(1));
    await b.dial(a.multiaddrs()[0]);
    await eventually(() => a.presence.get(b.peerId));

    await b.stop();
    const left = await eventually(() => leaves[0]);
    expect(left).toMatchObject({ peerId: b.peerId, reason: 'goodbye' });
    expect(a.presence.list()).toEqual([]);
  });

  it('ignores a goodbye signed by a peer other than the one leaving', async () => {
    const swarm = { name: 'lab', key: generateSwarmKey() };
    const a = await nodes.start({ swarm, presence: { intervalMs: 200, ttlMs: 3_600_000 } });
    const b = await nodes.start({ swarm });
    const c = await nodes.start({ swarm });
    await a.presence.setContent(() => content(0));
    await b.presence.setContent(() => content(1));
    await c.presence.setContent(() => content(2));
    await b.dial(a.multiaddrs()[0]);
    await c.dial(a.multiaddrs()[0]);
    await eventually(() => a.presence.get(b.peerId) && a.presence.get(c.peerId));
    const forged = { v: 1, peerId: b.peerId, timestamp: Date.now(), leaving: true };
    await c.libp2p.services.pubsub.publish(c.presence.topic, new TextEncoder().encode(JSON.stringify(forged)));
    await eventually(() => a.violations.count(c.libp2p.peerId) > 0);
    expect(a.presence.get(b.peerId)).toBeDefined();
  });

  it('refuses to announce content of the wrong shape', async () => {
    const a = await nodes.start();
    const bad = { ...content(0), pool: { load: -1, capacity: 4 } };
    await expect(a.presence.setContent(() => bad)).rejects.toMatchObject({ name: 'InvalidPresenceAnnouncementError' });
    const huge = { ...content(0), clientScripts: Array.from({ length: 256 }, (_, i) => `${i}`.padEnd(256, 'x')) };
    await expect(a.presence.setContent(() => huge)).rejects.toMatchObject({ name: 'InvalidPresenceAnnouncementError' });
  });

  it('drops an announcement whose signer is not the peer it speaks for', async () => {
    const a = await nodes.start();
    const b = await nodes.start();
    await b.dial(a.multiaddrs()[0]);
    await a.presence.setContent(() => content(0));
    await eventually(() => b.libp2p.services.pubsub.getSubscribers(a.presence.topic).length > 0);
    const forged = { ...content(9), v: 1, peerId: a.peerId, timestamp: Date.now() };
    await b.libp2p.services.pubsub.publish(b.presence.topic, new TextEncoder().encode(JSON.stringify(forged)));
    await eventually(() => a.violations.count(b.libp2p.peerId) > 0);
    expect(a.presence.get(a.peerId)).toBeUndefined();
    expect(a.presence.list()).toEqual([]);
  });
});
