/**
 * Creating, joining and leaving a swarm through the control API, on real peer runtimes (SQLite, libp2p on
 * 127.0.0.1, no mDNS): p2p starts and stops without a restart, the token is stored as the CLI stores it.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiErrorBody, PeersResponse, StatusPayload, SwarmMembership } from '../../common/api.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { readStoredSwarmToken, swarmFile } from '../p2p/settings.ts';
import { PeerRuntime, type PeerOptions } from '../runtime.ts';

const LOOPBACK = ['/ip4/127.0.0.1/tcp/0'];
const dirs: string[] = [];
const runtimes: PeerRuntime[] = [];

function tempDir(name: string) {
  const dir = mkdtempSync(join(tmpdir(), `agentjet-swarm-routes-${name}-`));
  dirs.push(dir);
  return dir;
}

async function startPeer(dataDir: string, bootstrap: string[] = [], models: PeerOptions['models'] = []) {
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models,
    p2p: { listen: LOOPBACK, mdns: false, presenceIntervalMs: 200, bootstrap },
  });
  runtimes.push(runtime);
  return runtime;
}

async function call<T>(runtime: PeerRuntime, method: string, path: string, body?: unknown) {
  const response = await fetch(`${runtime.urls.api}${path}`, {
    method,
    headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as T };
}

async function swarmPost<T>(runtime: PeerRuntime, path: string, body: unknown) {
  const response = await fetch(`http://127.0.0.1:${runtime.port}/swarm/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as T };
}

async function until(condition: () => Promise<boolean>, what: string) {
  for (let i = 0; i < 200; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

let creatorDir: string;
let creator: PeerRuntime;
let joiner: PeerRuntime | undefined;
let token: string | undefined;

/** The creator's swarm token, the swarm created first when no test before this one did (each test runs alone too). */
async function swarmToken(): Promise<string> {
  if (!token) {
    const created = await call<SwarmMembership>(creator, 'POST', '/swarm/create', { name: 'ui-lab' });
    expect(created.status).toBe(200);
    token = created.body.token!;
  }
  return token;
}

/** A second peer that knows where the creator listens and is in no swarm yet. */
async function joinerPeer(): Promise<PeerRuntime> {
  await swarmToken();
  joiner ??= await startPeer(tempDir('joiner'), [creator.p2p!.node.multiaddrs()[0]]);
  return joiner;
}

beforeAll(async () => {
  creatorDir = tempDir('creator');
  // The creator hosts the tiny model, so a peer that joins at runtime can be seen using it through the swarm.
  creator = await startPeer(creatorDir, [], [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 2 }]);
});

afterAll(async () => {
  await Promise.all(runtimes.map((runtime) => runtime.stop()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('swarm membership routes', () => {
  it('creates a swarm at runtime: p2p starts, the token is stored, the peer lists itself', async () => {
    const before = await call<SwarmMembership>(creator, 'GET', '/swarm');
    expect(before.body).toMatchObject({ joined: false, swarm: null, token: null });
    expect((await call(creator, 'GET', '/peers')).status).toBe(404);

    const created = await call<SwarmMembership>(creator, 'POST', '/swarm/create', { name: 'ui-lab' });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ joined: true, swarm: 'ui-lab' });
    token = created.body.token!;
    expect(token.startsWith('ajs1.')).toBe(true);
    expect(readStoredSwarmToken(creator.paths.p2p)).toBe(token);

    const peers = await call<PeersResponse>(creator, 'GET', '/peers');
    expect(peers.body.swarm).toBe('ui-lab');
    expect(peers.body.peers).toEqual([expect.objectContaining({ peerId: created.body.peerId, self: true })]);
    const status = await call<StatusPayload>(creator, 'GET', '/status');
    expect(status.body.p2p).toMatchObject({ enabled: true, swarm: 'ui-lab', peerId: created.body.peerId });

    const again = await call<ApiErrorBody>(creator, 'POST', '/swarm/create', { name: 'other' });
    expect(again.status).toBe(409);
    expect(again.body.error.name).toBe('AlreadyInSwarmError');
  });

  it('refuses a bad token with a 400 naming it, and changes nothing', async () => {
    const joiner = await joinerPeer();
    const token = await swarmToken();
    for (const bad of ['not-a-token', 'ajs1.e30', token.slice(0, -6)]) {
      const answer = await call<ApiErrorBody>(joiner, 'POST', '/swarm/join', { token: bad });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ name: 'InvalidSwarmTokenError', field: 'token' });
    }
    const missing = await call<ApiErrorBody>(joiner, 'POST', '/swarm/join', {});
    expect(missing.status).toBe(400);
    expect(missing.body.error.field).toBe('token');
    expect(existsSync(swarmFile(joiner.paths.p2p))).toBe(false);
    expect((await call<SwarmMembership>(joiner, 'GET', '/swarm')).body.joined).toBe(false);
    expect(joiner.p2p).toBeUndefined();
  });

  it('joins with the token and sees the creator; leaves, and joins again in the same process', async () => {
    const joiner = await joinerPeer();
    const token = await swarmToken();
    const joined = await call<SwarmMembership>(joiner, 'POST', '/swarm/join', { token });
    expect(joined.body).toMatchObject({ joined: true, swarm: 'ui-lab', token });
    expect(readStoredSwarmToken(joiner.paths.p2p)).toBe(token);
    const creatorId = creator.p2p!.node.peerId;
    await until(async () => {
      const peers = await call<PeersResponse>(joiner, 'GET', '/peers');
      return peers.body.peers.some((peer) => peer.peerId === creatorId && peer.models.some((m) => m.name === 'tiny'));
    }, 'the creator and its model in the joiner’s peer list');
    // The relays started with the swarm: the joiner's agents get the creator's model through its own gateway.
    const episode = await swarmPost<CreateEpisodeResponse>(joiner, '/episodes', { model: 'tiny', taskId: 't-1' });
    expect(episode.status).toBe(201);
    expect(episode.body.baseUrl).toBe(joiner.urls.gateway);
    expect((await swarmPost(joiner, `/episodes/${episode.body.episodeId}/abort`, { reason: 'test' })).status).toBe(200);

    const left = await call<SwarmMembership>(joiner, 'POST', '/swarm/leave');
    expect(left.body).toMatchObject({ joined: false, swarm: null, token: null, peerId: null });
    expect(existsSync(swarmFile(joiner.paths.p2p))).toBe(false);
    expect((await call(joiner, 'GET', '/peers')).status).toBe(404);
    expect((await call<StatusPayload>(joiner, 'GET', '/status')).body.p2p.enabled).toBe(false);
    // The relays in front of /swarm/v1 and /v1 went with it: the creator's model is out of reach.
    const offSwarm = await swarmPost<ApiErrorBody>(joiner, '/episodes', { model: 'tiny', taskId: 't-2' });
    expect(offSwarm.status).toBe(404);
    const leaveAgain = await call<ApiErrorBody>(joiner, 'POST', '/swarm/leave');
    expect(leaveAgain.status).toBe(409);
    expect(leaveAgain.body.error.name).toBe('NotInSwarmError');

    const rejoined = await call<SwarmMembership>(joiner, 'POST', '/swarm/join', { token });
    expect(rejoined.body.joined).toBe(true);
    await until(async () => {
      const peers = await call<PeersResponse>(joiner, 'GET', '/peers');
      return peers.status === 200 && peers.body.peers.some((peer) => peer.peerId === creatorId);
    }, 'the creator after joining again');
  });

  it('refuses a bad swarm name, and any change on a peer started with --no-p2p', async () => {
    const named = await startPeer(tempDir('named'));
    const badName = await call<ApiErrorBody>(named, 'POST', '/swarm/create', { name: 'no spaces allowed' });
    expect(badName.status).toBe(400);
    expect(badName.body.error.field).toBe('name');
    expect(existsSync(swarmFile(named.paths.p2p))).toBe(false);

    const off = await PeerRuntime.start({ dataDir: tempDir('off'), port: 0, consoleLogLevel: 'silent', p2p: { enabled: false } });
    runtimes.push(off);
    expect((await call<SwarmMembership>(off, 'GET', '/swarm')).body).toMatchObject({ joined: false, disabled: true });
    for (const [path, body] of [['/swarm/create', {}], ['/swarm/join', { token: await swarmToken() }]] as const) {
      const refused = await call<ApiErrorBody>(off, 'POST', path, body);
      expect(refused.status).toBe(409);
      expect(refused.body.error.name).toBe('P2pDisabledError');
    }
    expect(off.p2p).toBeUndefined();
  });

  it('joins the stored swarm again at the next start', async () => {
    const token = await swarmToken();
    const swarmName = creator.p2p!.node.swarmName;
    await creator.stop();
    const restarted = await startPeer(creatorDir);
    const membership = await call<SwarmMembership>(restarted, 'GET', '/swarm');
    expect(membership.body).toMatchObject({ joined: true, swarm: swarmName, token });
  });
});
