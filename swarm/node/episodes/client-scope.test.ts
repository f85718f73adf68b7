/**
 * Client keys act in their own client's name only, on a real peer (SQLite, HTTP, builtin:tiny): each cross-client
 * action is refused and changes nothing; expired, revoked and old-format keys are refused; the control token still
 * acts on every episode.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiErrorBody } from '../../common/api.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { revokeClientKeys } from '../store/client-keys.ts';
import { getEpisode } from '../store/episode-reads.ts';
import { mintClientKey } from './keys.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-client-scope-'));
let runtime: PeerRuntime;

beforeAll(async () => {
  runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
    training: { autoStart: false },
  });
});
afterAll(async () => {
  await runtime.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const keyOf = (client: string, ttlS?: number, now?: number) => mintClientKey(runtime.identity.secret, client, { ttlS, now });

async function swarm<T = ApiErrorBody>(path: string, key: string, body: unknown = undefined) {
  const res = await fetch(`http://127.0.0.1:${runtime.port}/swarm/v1${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as T };
}

async function begin(key: string, extra: Record<string, unknown> = {}) {
  const res = await swarm<CreateEpisodeResponse>('/episodes', key, { model: 'tiny', taskId: 't', ...extra });
  expect(res.status).toBe(201);
  return res.body.episodeId;
}

describe('client keys', () => {
  it('begin episodes in their own client name, whatever the request says', async () => {
    const id = await begin(keyOf('alice'));
    expect(getEpisode(runtime.db, id)?.client).toBe('alice');
    const spoofed = await swarm('/episodes', keyOf('alice'), { model: 'tiny', taskId: 't', client: 'bob' });
    expect(spoofed.status).toBe(403);
    expect(spoofed.body.error.name).toBe('ForbiddenError');
    // The control token may label an episode with any client.
    const labelled = await begin(runtime.token, { client: 'bob' });
    expect(getEpisode(runtime.db, labelled)?.client).toBe('bob');
  });

  it("cannot end or abort another client's episode, nor one begun without a client", async () => {
    const bobs = await begin(keyOf('bob'));
    const anonymous = await begin(runtime.token);
    for (const id of [bobs, anonymous]) {
      const ended = await swarm(`/episodes/${id}/end`, keyOf('alice'), { reward: -5 });
      expect(ended.status).toBe(403);
      expect(ended.body.error.name).toBe('ForbiddenError');
      const aborted = await swarm(`/episodes/${id}/abort`, keyOf('alice'), { reason: 'spite' });
      expect(aborted.status).toBe(403);
      expect(getEpisode(runtime.db, id)?.state).toBe('active');
    }
    expect((await swarm(`/episodes/${bobs}/end`, keyOf('bob'), { reward: 1 })).status).toBe(200);
    expect((await swarm(`/episodes/${anonymous}/abort`, runtime.token, { reason: 'done' })).status).toBe(200);
    // An unknown episode is still the episode service's 404, not a 403.
    expect((await swarm('/episodes/ep_nope/end', keyOf('alice'), { reward: 1 })).status).toBe(404);
  });

  it('refuses expired, revoked and old-format keys', async () => {
    const expired = keyOf('carol', 1, Date.now() - 10_000);
    expect((await swarm('/status', expired)).status).toBe(401);
    const before = keyOf('dave');
    expect((await swarm('/status', before)).status).toBe(200);
    revokeClientKeys(runtime.db, 'dave');
    const revoked = await swarm('/episodes', before, { model: 'tiny', taskId: 't' });
    expect(revoked.status).toBe(401);
    expect(revoked.body.error.name).toBe('AuthenticationError');
    const fresh = mintClientKey(runtime.identity.secret, 'dave', { generation: 1 });
    expect((await swarm('/status', fresh)).status).toBe(200);
    expect((await swarm('/status', 'aj-cl-dave.c2lnbmF0dXJl')).status).toBe(401);
  });
});
