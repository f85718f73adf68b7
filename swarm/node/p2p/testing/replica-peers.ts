/**
 * A server peer and serving replicas of the builtin `tiny` model in this process, on loopback, for the weight-sync
 * tests: start them, play a GRPO group on a peer's swarm protocol, and wait for what a replica fetched.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSwarmToken } from '../../../../p2p/index.ts';
import { eventually } from '../../../../p2p/testing/nodes.ts';
import type { CreateEpisodeResponse } from '../../../common/swarm-api.ts';
import { PeerRuntime, type PeerOptions } from '../../runtime.ts';
import type { FetchedWeights } from '../weights-sync.ts';

const LOOPBACK = ['/ip4/127.0.0.1/tcp/0'];
/** Fast presence, so that a replica hears the server (and its weights announcements) soon after it starts. */
const PRESENCE_INTERVAL_MS = 200;

export const TINY_MODEL = { name: 'tiny', source: { kind: 'builtin' as const, name: 'tiny' }, aliases: [], poolLimit: 8 };

export interface ReplicaPeers {
  server: PeerRuntime;
  replicas: PeerRuntime[];
  stop(): Promise<void>;
}

/** Resolves once `listener` has heard `speaker`'s presence (its models, its weights announcements). */
export async function untilHeard(listener: PeerRuntime, speaker: PeerRuntime): Promise<void> {
  const speakerId = speaker.p2p!.node.peerId;
  await eventually(() => listener.p2p!.node.presence.list().some((entry) => entry.peerId === speakerId), { what: `${speakerId}'s presence at ${listener.p2p!.node.peerId}`, intervalMs: 50 });
}

/** The server trains with `server` settings; each replica mirrors tiny and hosts it with its settings, never training. */
export async function startReplicaPeers(init: { name: string; server: PeerOptions['training']; replicas: unknown[] }): Promise<ReplicaPeers> {
  const swarmToken = createSwarmToken({ name: 'lab' });
  const dirs: string[] = [];
  const peers: PeerRuntime[] = [];
  const stop = async () => {
    await Promise.allSettled(peers.map((peer) => peer.stop()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  };
  const dataDir = (name: string) => {
    const dir = mkdtempSync(join(tmpdir(), `agentjet-${init.name}-${name}-`));
    dirs.push(dir);
    return dir;
  };
  try {
    const server = await PeerRuntime.start({
      dataDir: dataDir('server'),
      port: 0,
      consoleLogLevel: 'silent',
      models: [TINY_MODEL],
      training: init.server,
      p2p: { swarmToken, listen: LOOPBACK, mdns: false, presenceIntervalMs: PRESENCE_INTERVAL_MS },
    });
    peers.push(server);
    const replicas: PeerRuntime[] = [];
    for (const [i, config] of init.replicas.entries()) {
      const replica = await PeerRuntime.start({
        dataDir: dataDir(`replica${i}`),
        port: 0,
        consoleLogLevel: 'silent',
        models: [TINY_MODEL],
        training: { config, autoStart: false },
        p2p: {
          swarmToken,
          listen: LOOPBACK,
          mdns: false,
          presenceIntervalMs: PRESENCE_INTERVAL_MS,
          bootstrap: [server.p2p!.node.multiaddrs()[0]],
          mirror: ['tiny'],
        },
      });
      peers.push(replica);
      replicas.push(replica);
    }
    // Weights are announced over gossip: wait until the server's announcements reach every replica.
    for (const replica of replicas) await untilHeard(replica, server);
    return { server, replicas, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export async function swarmPost(peer: PeerRuntime, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${peer.port}/swarm/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${peer.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export async function startEpisode(peer: PeerRuntime, taskId: string): Promise<CreateEpisodeResponse> {
  const created = await swarmPost(peer, '/episodes', { model: 'tiny', taskId, sampling: { max_tokens: 4 } });
  if (created.status !== 201) throw new Error(`episode not created: ${created.status} ${JSON.stringify(created.body)}`);
  return created.body as unknown as CreateEpisodeResponse;
}

/** One chat call of an episode: its HTTP status and the policy version that answered it (`system_fingerprint`). */
export async function chat(episode: CreateEpisodeResponse, content: string): Promise<{ status: number; policyVersion: number | null }> {
  const res = await fetch(`${episode.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content }], max_tokens: 4 }),
  });
  const body = (await res.json()) as { system_fingerprint?: string };
  const version = /^policy-v(\d+)$/.exec(body.system_fingerprint ?? '');
  return { status: res.status, policyVersion: version ? Number(version[1]) : null };
}

/** One group of episodes on the peer, one call each, ended with these rewards: one training step there. */
export async function playGroup(peer: PeerRuntime, taskId: string, rewards: number[]): Promise<void> {
  for (const reward of rewards) {
    const episode = await startEpisode(peer, taskId);
    const call = await chat(episode, 'hi');
    if (call.status !== 200) throw new Error(`chat call failed: ${call.status}`);
    const ended = await swarmPost(peer, `/episodes/${episode.episodeId}/end`, { reward });
    if (ended.status !== 200) throw new Error(`episode not ended: ${ended.status}`);
  }
}

/** The replica's next record of a fetched blob that matches. */
export function nextFetched(replica: PeerRuntime, matches: (entry: FetchedWeights) => boolean): Promise<FetchedWeights> {
  return new Promise((resolve) => {
    const off = replica.p2p!.weights.onChange((entry) => {
      if ('path' in entry && matches(entry)) {
        off();
        resolve(entry);
      }
    });
  });
}
