/**
 * Asynchronous training across two peers: while the server trains version v+1, a serving replica keeps answering
 * at version v; then it swaps to v+1 in place — no drain, no 503, no failed call — and an episode open across the
 * swap continues on the new weights (a partial rollout, each call stamped with its version).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EngineState } from '../models/model-host.ts';
import { chat, nextFetched, playGroup, startEpisode, startReplicaPeers, swarmPost, type ReplicaPeers } from './testing/replica-peers.ts';

/** Calls made at most while waiting for the replica to answer at the new version (each takes milliseconds). */
const MAX_CALLS = 2_000;
/** Calls made at the replica while the server's step is held. */
const CALLS_DURING_STEP = 5;

let peers: ReplicaPeers;

beforeAll(async () => {
  peers = await startReplicaPeers({
    name: 'async',
    server: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0, staleness: 1 } },
    replicas: [{ staleness: 1 }],
  });
}, 120_000);

afterAll(async () => {
  await peers?.stop();
});

describe('a replica of an asynchronously trained model', () => {
  it('serves version v while the server trains v+1, then switches without a failed call', async () => {
    const [replica] = peers.replicas;
    const served = replica.serving.models.find('tiny')!;
    const trained = peers.server.serving.models.find('tiny')!;
    const v = served.policyVersion;
    expect(trained.policyVersion).toBe(v);
    const states: EngineState[] = [];
    served.onStateChange((state) => states.push(state));

    // Hold the server's optimizer step until the replica has answered calls meanwhile.
    const engine = trained.engine;
    const trainStep = engine.trainStep.bind(engine);
    const held = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    engine.trainStep = async (...args) => {
      held.resolve();
      await release.promise;
      return trainStep(...args);
    };

    const episode = await startEpisode(replica, 'task-replica');
    const calls: { status: number; policyVersion: number | null }[] = [await chat(episode, 'before')];
    const loaded = nextFetched(replica, (entry) => entry.version > v);
    await playGroup(peers.server, 'task-async', [0, 1]);
    await held.promise;
    for (let i = 0; i < CALLS_DURING_STEP; i++) calls.push(await chat(episode, `during ${i}`));
    expect(calls.map((c) => c.policyVersion)).toEqual(Array(calls.length).fill(v));
    release.resolve();

    // Calls go on through the swap until one is answered by the new weights.
    let fetched: Awaited<typeof loaded> | undefined;
    void loaded.then((entry) => (fetched = entry));
    while (calls.length < MAX_CALLS && !(fetched?.loaded && calls.at(-1)?.policyVersion === fetched.version)) {
      calls.push(await chat(episode, `call ${calls.length}`));
    }
    expect(fetched?.refused).toBeUndefined();
    expect(fetched?.loaded).toBe(true);
    expect(fetched?.version).toBe(trained.policyVersion);
    expect(served.policyVersion).toBe(fetched!.version);
    expect(calls.filter((c) => c.status !== 200)).toEqual([]);
    const versions = calls.map((c) => c.policyVersion!);
    expect(versions[0]).toBe(v);
    expect(versions.at(-1)).toBe(fetched!.version);
    // Never back: once a call saw the new weights, every later one does.
    expect(versions.every((version, i) => i === 0 || version >= versions[i - 1])).toBe(true);
    // In place: the replica never drained or stopped answering.
    expect(states.filter((s) => s === 'draining' || s === 'updating')).toEqual([]);

    // The same weights as the server's, and the episode that spanned the swap ends normally.
    const [a, b] = await Promise.all([trained.engine.getWeights(), served.engine.getWeights()]);
    const name = 'model.layers.0.self_attn.q_proj.weight';
    expect(Array.from(b[name].data)).toEqual(Array.from(a[name].data));
    expect((await swarmPost(replica, `/episodes/${episode.episodeId}/end`, { reward: 1 })).status).toBe(200);
    // What it loaded is the server's to announce, not the replica's.
    expect(replica.p2p!.weights.published).toEqual([]);
  }, 120_000);
});
