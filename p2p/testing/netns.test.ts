/**
 * Two peers in separate network namespaces joined by a veth pair (their own addresses, a real link between
 * them): they connect and see each other in presence; when the link goes down (partition) each one's presence
 * drops the other; when it comes back (heal) they find each other again. Skips where `ip netns` is not allowed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateSwarmKey } from '../swarm-token/token.ts';
import { NetnsPair, probeNetns } from './netns.ts';
import { eventually } from './nodes.ts';
import { startPeerProcess, type PeerProcess } from './peer-processes.ts';

const netns = probeNetns();
const peers: PeerProcess[] = [];
const dirs: string[] = [];
let pair: NetnsPair | undefined;

afterAll(async () => {
  await Promise.allSettled(peers.map((peer) => peer.stop()));
  pair?.destroy();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const presenceOf = async (peer: PeerProcess) => (await peer.send<Array<{ peerId: string }>>({ cmd: 'presence' })).map((entry) => entry.peerId);

describe.runIf(netns.ok)('peers in separate network namespaces', () => {
  it('connect over their own addresses, lose each other in a partition and find each other again after it heals', async () => {
    pair = new NetnsPair();
    pair.create();
    const swarm = { name: 'lab', key: generateSwarmKey() };
    const start = (side: NetnsPair['a'], bootstrap: string[]) => {
      const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-netns-'));
      dirs.push(dataDir);
      return startPeerProcess({
        netns: side.ns,
        dataDir,
        swarm,
        listen: [`/ip4/${side.address}/tcp/0`],
        bootstrap,
        mdns: false,
        presence: { intervalMs: 200, ttlMs: 1_500 },
      });
    };
    const a = await start(pair.a, []);
    peers.push(a);
    expect(a.multiaddrs[0]).toContain(`/ip4/${pair.a.address}/tcp/`);
    const b = await start(pair.b, [a.multiaddrs[0]]);
    peers.push(b);

    await eventually(async () => (await presenceOf(a)).includes(b.peerId) && (await presenceOf(b)).includes(a.peerId), 100);

    pair.setLink(false);
    await eventually(async () => !(await presenceOf(a)).includes(b.peerId) && !(await presenceOf(b)).includes(a.peerId), 100);

    pair.setLink(true);
    await eventually(async () => (await presenceOf(a)).includes(b.peerId) && (await presenceOf(b)).includes(a.peerId), 100);
    expect(await b.send<string[]>({ cmd: 'connected' })).toContain(a.peerId);
  }, 90_000);
});

describe.skipIf(netns.ok)(`peers in separate network namespaces — skipped: ${netns.ok ? '' : netns.reason}`, () => {
  it.skip('needs root and ip netns', () => undefined);
});
