/**
 * A serving replica: a peer that hosts the same model without training it and mirrors the swarm's weights. After
 * the training peer's step, the replica must serve the new policy: same version, same weights.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSwarmToken } from '../../../p2p/index.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { nextFetched, playGroup, swarmPost, untilHeard } from './testing/replica-peers.ts';
import type { FetchedWeights } from './weights-sync.ts';

const LOOPBACK = ['/ip4/127.0.0.1/tcp/0'];
const dirs: string[] = [];
let trainer: PeerRuntime;
let replica: PeerRuntime;

const tinyModel = { name: 'tiny', source: { kind: 'builtin' as const, name: 'tiny' }, aliases: [], poolLimit: 4 };

beforeAll(async () => {
  const swarmToken = createSwarmToken({ name: 'lab' });
  const dataDir = (name: string) => {
    const dir = mkdtempSync(join(tmpdir(), `agentjet-replica-${name}-`));
    dirs.push(dir);
    return dir;
  };
  trainer = await PeerRuntime.start({
    dataDir: dataDir('trainer'),
    port: 0,
    consoleLogLevel: 'silent',
    models: [tinyModel],
    training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0 } },
    p2p: { swarmToken, listen: LOOPBACK, mdns: false, presenceIntervalMs: 200 },
  });
  replica = await PeerRuntime.start({
    dataDir: dataDir('replica'),
    port: 0,
    consoleLogLevel: 'silent',
    models: [tinyModel],
    training: { autoStart: false },
    p2p: { swarmToken, listen: LOOPBACK, mdns: false, presenceIntervalMs: 200, bootstrap: [trainer.p2p!.node.multiaddrs()[0]], mirror: ['tiny'] },
  });
  // Weights are announced over gossip: wait until the trainer's announcements reach the replica.
  await untilHeard(replica, trainer);
}, 120_000);

afterAll(async () => {
  await Promise.allSettled([replica?.stop(), trainer?.stop()]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('a serving replica', () => {
  it('loads the weights the training peer publishes, and serves them as the new policy version', async () => {
    const loaded = new Promise<FetchedWeights>((resolve) => {
      replica.p2p!.weights.onChange((entry) => {
        if ('path' in entry && entry.loaded) resolve(entry);
      });
    });
    // One group of two episodes with different rewards: one training step on the trainer.
    for (const reward of [0, 1]) {
      const created = await swarmPost(trainer, '/episodes', { model: 'tiny', taskId: 'task-r', sampling: { max_tokens: 4 } });
      expect(created.status).toBe(201);
      const episode = created.body as unknown as CreateEpisodeResponse;
      const call = await fetch(`${episode.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      });
      expect(call.status).toBe(200);
      expect((await swarmPost(trainer, `/episodes/${episode.episodeId}/end`, { reward })).status).toBe(200);
    }
    const entry = await loaded;
    const trained = trainer.serving.models.find('tiny')!;
    const served = replica.serving.models.find('tiny')!;
    expect(entry.version).toBe(trained.policyVersion);
    expect(served.policyVersion).toBe(trained.policyVersion);
    expect(served.state).toBe('idle');
    const [a, b] = await Promise.all([trained.engine.getWeights(), served.engine.getWeights()]);
    const name = 'model.layers.0.self_attn.q_proj.weight';
    // Published as f32: the replica's tensors are the trainer's, bit for bit.
    expect(Array.from(b[name].data)).toEqual(Array.from(a[name].data));
  }, 120_000);

  it('keeps the blobs of its newest two fetches on disk as versions go by, and says which it deleted', async () => {
    const trained = trainer.serving.models.find('tiny')!;
    for (let i = 0; i < 3; i++) {
      const before = trained.policyVersion;
      const fetched = nextFetched(replica, (entry) => entry.version > before);
      await playGroup(trainer, `task-p${i}`, [0, 1]);
      expect((await fetched).loaded).toBe(true);
    }
    const listed = replica.p2p!.weights.fetched.filter((f) => f.model === 'tiny');
    expect(listed.length).toBeGreaterThanOrEqual(4);
    const [kept, pruned] = [listed.slice(-2), listed.slice(0, -2)];
    expect(kept.map((f) => [f.pruned ?? false, existsSync(f.path)])).toEqual([
      [false, true],
      [false, true],
    ]);
    expect(pruned.every((f) => f.pruned === true && !existsSync(f.path))).toBe(true);
    expect(readdirSync(dirname(kept[0].path)).filter((f) => f.endsWith('.safetensors')).sort()).toEqual(kept.map((f) => basename(f.path)).sort());
    expect(replica.serving.models.find('tiny')!.policyVersion).toBe(trained.policyVersion);
  }, 120_000);

  it('labels published weights with the version they are, when the next step went in before they were read', async () => {
    const trained = trainer.serving.models.find('tiny')!;
    const engine = trained.engine;
    const tokens = Array.from({ length: 16 }, (_, i) => 40 + i);
    const mask = tokens.map((_, i) => (i >= 4 ? 1 : 0));
    const [oldLogprobs] = await engine.logprobs([tokens]);
    // An asynchronous run's next step reaches the engine just before a publish of the previous version reads it.
    const step = engine.trainStep([{ tokens, lossMask: mask, advantages: mask, oldLogprobs }], { learningRate: 1e-2, lossDivisor: 1 });
    const published = trainer.p2p!.weights.publish(trained);
    const { policyVersion } = await step;
    expect((await published).version).toBe(policyVersion);
  }, 120_000);
});
