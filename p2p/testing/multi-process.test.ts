/** Three peers, three processes: they find each other through bootstrap addresses and exchange presence. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { generateSwarmKey } from '../swarm-token/token.ts';
import { eventually } from './nodes.ts';
import { startPeerProcess } from './peer-processes.ts';
import type { PeerProcess } from './peer-processes.ts';

const peers: PeerProcess[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.allSettled(peers.map((p) => p.stop()));
  await Promise.allSettled(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'agentjet-peer-'));
  dirs.push(dir);
  return dir;
}

it('three peer processes meet through bootstrap addresses, and share presence', async () => {
  const swarm = { name: 'lab', key: generateSwarmKey() };
  const common = { swarm, listen: ['/ip4/127.0.0.1/tcp/0'], mdns: false, presence: { intervalMs: 300, ttlMs: 3_000 } };
  const seed = await startPeerProcess({ ...common, dataDir: await dataDir(), roles: ['server'] });
  peers.push(seed);
  const [worker, laptop] = await Promise.all([
    startPeerProcess({ ...common, dataDir: await dataDir(), bootstrap: seed.multiaddrs, roles: ['client'] }),
    startPeerProcess({ ...common, dataDir: await dataDir(), bootstrap: seed.multiaddrs, roles: ['client', 'gateway'] }),
  ]);
  peers.push(worker, laptop);

  type Seen = Array<{ peerId: string; roles: string[] }>;
  // Every peer learns of both others, including the two that only know the seed's address.
  for (const peer of peers) {
    const others = peers.filter((p) => p !== peer).map((p) => p.peerId).sort();
    const seen = await eventually(async () => {
      const list = await peer.send<Seen>({ cmd: 'presence' });
      return list.length === 2 ? list : undefined;
    }, 100);
    expect(seen.map((s) => s.peerId).sort()).toEqual(others);
  }
  const fromWorker = await worker.send<Seen>({ cmd: 'presence' });
  expect(fromWorker.find((s) => s.peerId === laptop.peerId)?.roles).toEqual(['client', 'gateway']);
});
