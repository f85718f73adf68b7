/**
 * The hardened edge on a real peer (PeerRuntime with builtin:tiny): the requests that used to end the process, a
 * rebinding Host, a foreign Origin on the event WebSocket, and a 7 MB prompt, each answered while the peer keeps
 * serving. server.test.ts covers each check in detail on a server of its own.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { getCalls } from '../store/episode-reads.ts';
import { rawGet, rawRequest } from './testing/raw-request.ts';

let peer: PeerRuntime;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentjet-edge-'));
  peer = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
  });
});

afterAll(async () => {
  await peer?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function startEpisode(): Promise<CreateEpisodeResponse> {
  const created = await fetch(`http://127.0.0.1:${peer.port}/swarm/v1/episodes`, {
    method: 'POST',
    headers: { authorization: `Bearer ${peer.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', taskId: 'edge' }),
  });
  expect(created.status).toBe(201);
  return (await created.json()) as CreateEpisodeResponse;
}

async function expectStillServing() {
  const res = await fetch(`${peer.urls.api}/status`, { headers: { authorization: `Bearer ${peer.token}` } });
  expect(res.status).toBe(200);
}

describe('a real peer', () => {
  it('survives the unauthenticated requests that used to end it', async () => {
    for (const target of ['//[', 'http://[::1/x', '/%E0%A4%A', '/assets/%E0%A4%A', '/api/episodes/%E0%A4%A']) {
      const res = await rawGet(peer.port, target);
      expect(res.status, target).toBeGreaterThan(0);
      expect(res.status, target).toBeLessThan(500);
      await expectStillServing();
    }
    const upgrade = await rawRequest(
      peer.port,
      ['GET //[ HTTP/1.1', `Host: 127.0.0.1:${peer.port}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='].join('\r\n'),
    );
    expect(upgrade.status).toBeLessThan(500);
    await expectStillServing();
  });

  it('refuses a rebinding Host and a foreign Origin on its WebSocket, and serves its own UI origin', async () => {
    const rebinding = await rawRequest(peer.port, ['GET /api/status HTTP/1.1', 'Host: evil.example'].join('\r\n'));
    expect(rebinding.status).toBe(421);
    const open = (origin: string) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${peer.port}/api/events?token=${peer.token}`, { origin });
        ws.once('open', () => {
          ws.close();
          resolve(101);
        });
        ws.once('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0);
          ws.terminate();
        });
        ws.once('error', () => resolve(0));
      });
    expect(await open('http://evil.example')).toBe(403);
    expect(await open(new URL(peer.urls.api).origin)).toBe(101);
  });

  it('answers bodies it must not parse with 4xx: text/plain (415), 10,000-deep JSON in a prompt or end metrics (400)', async () => {
    const episode = await startEpisode();
    const chat = (body: string, type = 'application/json') =>
      fetch(`${episode.baseUrl}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': type }, body });
    const good = JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    const plain = await chat(good, 'text/plain;charset=UTF-8');
    expect(plain.status).toBe(415);
    expect(((await plain.json()) as { error: { code: string } }).error.code).toBe('unsupported_media_type');
    const deep = '['.repeat(10_000) + ']'.repeat(10_000);
    const deepTools = await chat(
      `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"x":${deep}}}}]}`,
    );
    expect(deepTools.status).toBe(400);
    expect(((await deepTools.json()) as { error: { code: string } }).error.code).toBe('json_too_deep');
    const end = await fetch(`http://127.0.0.1:${peer.port}/swarm/v1/episodes/${episode.episodeId}/end`, {
      method: 'POST',
      headers: { authorization: `Bearer ${peer.token}`, 'content-type': 'application/json' },
      body: `{"reward":1,"metrics":{"m":${deep}}}`,
    });
    expect(end.status).toBe(400);
    expect(((await end.json()) as { error: { name: string } }).error.name).toBe('JsonTooDeepError');
    await expectStillServing();
  });

  it('refuses a 7 MB prompt with context_length_exceeded and records no call', async () => {
    const episode = await startEpisode();
    const res = await fetch(`${episode.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x'.repeat(7 * 1024 * 1024) }], max_tokens: 2 }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('context_length_exceeded');
    expect(getCalls(peer.db, episode.episodeId)).toHaveLength(0);
  });
});
