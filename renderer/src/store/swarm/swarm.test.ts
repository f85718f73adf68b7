import { describe, expect, it } from 'vitest';
import type { ModelStatus, StatusPayload } from '../../../../swarm/common/api.ts';
import { createAppStore } from '../index.ts';
import { ControlApiError } from '../../api/errors.ts';
import type { ApiRequest } from '../../api/client.ts';
import { createSwarm, joinSwarm, leaveSwarm } from './loaders.ts';
import { swarmSelectors } from './selectors.ts';
import { initialSwarmState } from './slice.ts';

function model(name: string, engineState: ModelStatus['engineState'], active = 0, limit = 8): ModelStatus {
  return { name, source: 'builtin:tiny', engineState, policyVersion: 1, step: 2, backend: 'wasm', pool: { active, limit } };
}

function status(models: ModelStatus[]): StatusPayload {
  return {
    app: 'agentjet',
    version: '0.1.0',
    nodeId: 'n1',
    startedAt: '2026-01-01T00:00:00Z',
    uptimeS: 3,
    roles: ['server'],
    dataDir: '/d',
    backend: null,
    urls: { api: 'http://x/api', gateway: 'http://x/v1', ui: 'http://x/' },
    models,
    store: { path: '/d/db', schemaVersion: 1, episodes: 0 },
    p2p: { enabled: false, peerId: null, peers: 0, swarm: null },
  };
}

describe('swarm slice', () => {
  it('keeps the latest status and when it arrived', () => {
    const store = createAppStore();
    expect(store.getState().swarm.status).toBeNull();
    store.getState().statusReceived(status([]), 42);
    expect(store.getState().swarm).toMatchObject({ status: { nodeId: 'n1' }, receivedAt: 42 });
  });

  it('asks for the peer list again when the swarm changes or an announcement interval passed, not on every status', () => {
    const store = createAppStore();
    const key = () => swarmSelectors.peersChangeKey(store.getState().swarm, 3_000);
    const inSwarm = (peers: number) => ({ ...status([model('tiny', 'idle')]), p2p: { enabled: true, peerId: 'p', peers, swarm: 'lab' } });
    store.getState().statusReceived(inSwarm(1), 10_000);
    const first = key();
    store.getState().statusReceived(inSwarm(1), 11_000);
    expect(key()).toBe(first);
    store.getState().statusReceived(inSwarm(2), 11_500);
    expect(key()).not.toBe(first);
    const second = key();
    store.getState().statusReceived(inSwarm(2), 12_000);
    expect(key()).not.toBe(second);
  });

  it('keeps the last peer list when a poll fails, and clears the error with the next list', () => {
    const store = createAppStore();
    const peers = { swarm: 'lab', peerId: 'p1', addresses: [], peers: [{ peerId: 'p1', self: true, connected: true, lastSeen: null, roles: ['server'], models: [{ name: 'tiny', policyVersion: 3 }], pool: { load: 0, capacity: 64 }, clientScripts: [] }] };
    store.getState().peersLoaded(peers);
    store.getState().peersFailed('The peer did not answer');
    expect(store.getState().swarm).toMatchObject({ peers, peersError: 'The peer did not answer' });
    store.getState().statusReceived(status([]), 1);
    expect(store.getState().swarm.peers).toBe(peers);
    store.getState().peersLoaded(peers);
    expect(store.getState().swarm.peersError).toBeNull();
  });
});

describe('swarm selectors', () => {
  it('gives a stable empty model list before any status', () => {
    const empty = { ...initialSwarmState };
    expect(swarmSelectors.models(empty)).toHaveLength(0);
    expect(swarmSelectors.models(empty)).toBe(swarmSelectors.models(empty));
  });

  it('counts training and failed models', () => {
    const swarm = { ...initialSwarmState, status: status([model('a', 'rolling'), model('b', 'updating'), model('c', 'idle'), model('d', 'failed')]), receivedAt: 0 };
    expect(swarmSelectors.trainingModelCount(swarm)).toBe(2);
    expect(swarmSelectors.failedModelCount(swarm)).toBe(1);
  });

  it('summarises p2p as disabled, alone or connected', () => {
    expect(swarmSelectors.p2pSummary({ enabled: false, peerId: null, peers: 0, swarm: null }).state).toBe('disabled');
    expect(swarmSelectors.p2pSummary({ enabled: true, peerId: 'p', peers: 0, swarm: 'lab' }).state).toBe('alone');
    expect(swarmSelectors.p2pSummary({ enabled: true, peerId: 'p', peers: 1, swarm: 'lab' }).label).toBe('1 peer connected');
    expect(swarmSelectors.p2pSummary({ enabled: true, peerId: 'p', peers: 3, swarm: 'lab' }).label).toBe('3 peers connected');
  });

  it('reports pool usage within [0, 1]', () => {
    expect(swarmSelectors.poolUsage(model('a', 'rolling', 2, 8))).toBe(0.25);
    expect(swarmSelectors.poolUsage(model('a', 'rolling', 9, 8))).toBe(1);
    expect(swarmSelectors.poolUsage(model('a', 'idle', 0, 0))).toBe(0);
  });
});

describe('swarm membership', () => {
  const joined = { joined: true, disabled: false, swarm: 'lab', token: 'ajs1.abc', peerId: 'p1', addresses: [] };
  const off = { joined: false, disabled: false, swarm: null, token: null, peerId: null, addresses: [] };
  const peers = { swarm: 'lab', peerId: 'p1', addresses: [], peers: [] };

  /** A request function that answers each path from a table (or throws what the table holds). */
  function fakeRequest(answers: Record<string, unknown>): { request: ApiRequest; sent: unknown[] } {
    const sent: unknown[] = [];
    const request = (async (method: string, path: string, body?: unknown) => {
      sent.push({ method, path, body });
      const answer = answers[`${method} ${path}`];
      if (answer instanceof Error) throw answer;
      return answer;
    }) as ApiRequest;
    return { request, sent };
  }

  it('creates a swarm and keeps the answer with its token', async () => {
    const store = createAppStore();
    const { request, sent } = fakeRequest({ 'POST /swarm/create': joined });
    await createSwarm(store, request, { name: 'lab' });
    expect(sent).toEqual([{ method: 'POST', path: '/swarm/create', body: { name: 'lab' } }]);
    expect(store.getState().swarm).toMatchObject({ membership: { token: 'ajs1.abc' }, membershipPending: null, membershipError: null });
  });

  it('keeps a refused join as an error named by the server, membership unchanged', async () => {
    const store = createAppStore();
    store.getState().membershipLoaded(off);
    const { request } = fakeRequest({ 'POST /swarm/join': new ControlApiError('InvalidSwarmTokenError', 'bad', 400, 'token') });
    await joinSwarm(store, request, 'nope');
    expect(store.getState().swarm.membershipError?.name).toBe('InvalidSwarmTokenError');
    expect(store.getState().swarm.membership).toBe(off);
    expect(store.getState().swarm.membershipPending).toBeNull();
  });

  it('drops the peer list on leaving, and clears the last error with the next change', async () => {
    const store = createAppStore();
    store.getState().membershipLoaded(joined);
    store.getState().peersLoaded(peers);
    store.getState().membershipFailed({ name: 'ConflictError', message: 'x' });
    const { request } = fakeRequest({ 'POST /swarm/leave': off });
    await leaveSwarm(store, request);
    expect(store.getState().swarm).toMatchObject({ membership: off, peers: null, membershipError: null });
  });
});
