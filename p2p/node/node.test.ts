import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { generateSwarmKey } from '../swarm-token/token.ts';
import { eventually, testNodes } from '../testing/nodes.ts';
import { IDENTITY_FILE } from './identity.ts';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

/** How libp2p reports a connection that was refused or cut by the other side. */
const CONNECTION_REFUSALS = ['UnexpectedEOFError', 'EncryptionFailedError', 'SwarmKeyMismatchError', 'ConnectionClosedError', 'StreamResetError', 'ConnectionDeniedError', 'DialDeniedError', 'MuxerClosedError', 'StreamAbortedError'];

describe('createSwarmNode', () => {
  it('keeps its peer id across restarts, in a key file only its owner can read', async () => {
    const dataDir = await nodes.tempDir();
    const first = await nodes.start({ dataDir });
    const peerId = first.peerId;
    await first.stop();
    await first.stop(); // stopping twice is harmless
    const second = await nodes.start({ dataDir });
    expect(second.peerId).toBe(peerId);
    expect((await stat(join(dataDir, IDENTITY_FILE))).mode & 0o777).toBe(0o600);
  });

  it('rejects a listen address that is not a multiaddr', async () => {
    await expect(nodes.start({ listen: ['localhost:80'] })).rejects.toMatchObject({ name: 'InvalidNodeOptionsError' });
  });

  it('connects peers of the same private swarm over TCP and over WebSockets', async () => {
    const swarm = { name: 'lab', key: generateSwarmKey() };
    const a = await nodes.start({ swarm, listen: ['/ip4/127.0.0.1/tcp/0', '/ip4/127.0.0.1/tcp/0/ws'] });
    const b = await nodes.start({ swarm });
    const c = await nodes.start({ swarm });
    const tcpAddress = a.multiaddrs().find((m) => !m.includes('/ws'));
    const wsAddress = a.multiaddrs().find((m) => m.includes('/ws'));
    expect(await b.dial(tcpAddress as string)).toBe(a.peerId);
    expect(await c.dial(wsAddress as string)).toBe(a.peerId);
  });

  it('keeps out a peer with another swarm key, and a peer with no key', async () => {
    const a = await nodes.start({ swarm: { name: 'lab', key: generateSwarmKey() } });
    const wrongKey = await nodes.start({ swarm: { name: 'lab', key: generateSwarmKey() } });
    const noKey = await nodes.start();
    const attempts = await Promise.allSettled(
      [wrongKey, noKey].map((outsider) => outsider.dial(a.multiaddrs()[0], { signal: AbortSignal.timeout(10_000) })),
    );
    expect(attempts.map((attempt) => attempt.status)).toEqual(['rejected', 'rejected']);
    expect(a.connectedPeers()).toEqual([]);
  });

  it('admits only allow-listed peers when an allow-list is set', async () => {
    const friend = await nodes.start();
    const stranger = await nodes.start();
    const a = await nodes.start({ allowList: [friend.peerId] });
    a.episode.handle(async () => ({ ok: true }));
    expect(await friend.dial(a.multiaddrs()[0])).toBe(a.peerId);
    expect(await friend.episode.request(a.peerId, {})).toEqual({ ok: true });
    // The stranger's side may finish its handshake before the gater's verdict arrives; it is cut off right after.
    await stranger.dial(a.multiaddrs()[0], { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
    // Whichever way the connection is refused (at dial, or cut right after), it is a connection failure, not a bug.
    const refused = await stranger.episode.request(a.peerId, {}).then(() => null, (err: Error) => err.name);
    expect(CONNECTION_REFUSALS).toContain(refused);
    await eventually(() => !stranger.connectedPeers().includes(a.peerId));
    expect(a.connectedPeers()).toEqual([friend.peerId]);
  });

  it('rejects an allow-list entry that is not a peer id', async () => {
    await expect(nodes.start({ allowList: ['bob'] })).rejects.toMatchObject({ name: 'InvalidNodeOptionsError' });
  });

  it('finds its bootstrap peer at start and redials it after it drops and comes back', async () => {
    const serverDir = await nodes.tempDir();
    const server = await nodes.start({ dataDir: serverDir });
    const address = server.multiaddrs()[0];
    const port = address.split('/tcp/')[1].split('/')[0];
    const client = await nodes.start({ bootstrap: [address] });
    await eventually(() => client.connectedPeers().includes(server.peerId));
    await server.stop();
    await eventually(() => !client.connectedPeers().includes(server.peerId));
    const restarted = await nodes.start({ dataDir: serverDir, listen: [`/ip4/127.0.0.1/tcp/${port}`] });
    expect(restarted.peerId).toBe(server.peerId);
    await eventually(() => client.connectedPeers().includes(server.peerId), 50);
  });
});
