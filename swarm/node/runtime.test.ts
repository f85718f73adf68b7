import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ServerEvent } from '../common/api.ts';
import { PeerRuntime } from './runtime.ts';

const peers: PeerRuntime[] = [];
afterEach(async () => {
  await Promise.all(peers.splice(0).map((p) => p.stop()));
});

async function startPeer() {
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-rt-'));
  const peer = await PeerRuntime.start({ dataDir, port: 0, consoleLogLevel: 'silent' });
  peers.push(peer);
  return peer;
}

describe('PeerRuntime', () => {
  it('answers /api/status only with the bearer token', async () => {
    const peer = await startPeer();
    const anonymous = await fetch(`${peer.urls.api}/status`);
    expect(anonymous.status).toBe(401);
    expect(((await anonymous.json()) as { error: { name: string } }).error.name).toBe('AuthenticationError');

    const wrong = await fetch(`${peer.urls.api}/status`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);

    const ok = await fetch(`${peer.urls.api}/status`, { headers: { authorization: `Bearer ${peer.token}` } });
    expect(ok.status).toBe(200);
    const status = await ok.json();
    expect(status).toMatchObject({ app: 'agentjet', nodeId: peer.identity.nodeId, store: { schemaVersion: expect.any(Number) } });
  });

  it('answers unknown API routes with 404 in the API error shape', async () => {
    const peer = await startPeer();
    const res = await fetch(`${peer.urls.api}/nothing-here`, { headers: { authorization: `Bearer ${peer.token}` } });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { name: string } }).error.name).toBe('NotFoundError');
  });

  it('pushes status over the WebSocket and refuses a wrong token', async () => {
    const peer = await startPeer();
    const wsBase = peer.urls.api.replace('http', 'ws');
    const event = await new Promise<ServerEvent>((resolve, reject) => {
      const ws = new WebSocket(`${wsBase}/events?token=${peer.token}`);
      ws.once('message', (data) => {
        ws.close();
        resolve(JSON.parse(String(data)) as ServerEvent);
      });
      ws.once('error', reject);
    });
    expect(event.type).toBe('status');
    if (event.type === 'status') expect(event.data.nodeId).toBe(peer.identity.nodeId);

    const refused = await new Promise<number>((resolve) => {
      const ws = new WebSocket(`${wsBase}/events?token=wrong`);
      ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.once('error', () => resolve(-1));
    });
    expect(refused).toBe(401);
  });

  it('keeps its secret files private and stops twice without error', async () => {
    const peer = await startPeer();
    expect(statSync(peer.paths.identity).mode & 0o077).toBe(0);
    expect(statSync(peer.paths.control).mode & 0o077).toBe(0);
    await peer.stop();
    await peer.stop();
    expect(peer.db.open).toBe(false);
  });
});
