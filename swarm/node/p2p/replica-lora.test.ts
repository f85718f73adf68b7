/**
 * LoRA across the swarm: the server trains a LoRA adapter and broadcasts only that delta. A replica whose engine
 * holds the same LoRA config loads the adapter as it is; a replica without LoRA merges it into its base weights
 * (W + scale·B·A). Both then serve the server's policy. A LoRA replica refuses full weights and adapters of
 * another LoRA config, and changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerateRequest, NamedTensors, TrainerEngine } from '../../../worker/common/engine.ts';
import { encodeWeightsBlob } from './weights-blob.ts';
import { nextFetched, playGroup, startReplicaPeers, type ReplicaPeers } from './testing/replica-peers.ts';

const LORA = { rank: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] };
const Q_PROJ = 'model.layers.0.self_attn.q_proj.weight';
/** Greedy, so that two engines with the same policy give the same tokens. */
const GREEDY: GenerateRequest = {
  promptIds: [10, 20, 30, 40, 50],
  sampling: { maxTokens: 8, temperature: 0, topP: 1, topK: 0, stopTokenIds: [], stopStrings: [], topLogprobs: 0 },
};

let peers: ReplicaPeers;

beforeAll(async () => {
  peers = await startReplicaPeers({
    name: 'lora',
    // A large learning rate, so that one step moves the adapter far enough to be seen in the outputs.
    server: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0, lora: LORA, train: { learningRate: 0.05 } } },
    replicas: [{ lora: LORA }, {}],
  });
}, 120_000);

afterAll(async () => {
  await peers?.stop();
});

const tiny = (i: number) => peers.replicas[i].serving.models.find('tiny')!;

async function greedy(engine: TrainerEngine) {
  const result = await engine.generate(GREEDY);
  return { ids: result.tokens.map((t) => t.id), logprobs: result.tokens.map((t) => t.logprob), policyVersion: result.policyVersion };
}

describe('a LoRA run broadcast to serving replicas', () => {
  let source: NamedTensors;

  it('sends the adapter only, which a LoRA replica loads and a full replica merges into its base', async () => {
    source = await tiny(1).engine.getWeights();
    const before = await greedy(tiny(1).engine);
    const loaded = peers.replicas.map((replica) => nextFetched(replica, (entry) => entry.loaded || entry.refused !== undefined));
    await playGroup(peers.server, 'task-lora', [0, 1]);
    const [onLora, onFull] = await Promise.all(loaded);
    const trained = peers.server.serving.models.find('tiny')!;
    for (const entry of [onLora, onFull]) {
      expect(entry.refused).toBeUndefined();
      expect(entry.loaded).toBe(true);
      expect(entry.version).toBe(trained.policyVersion);
    }
    const published = peers.server.p2p!.weights.published.at(-1)!;
    expect(published.kind).toBe('lora-adapter');
    // A delta: far fewer bytes than the model.
    const modelBytes = Object.values(source).reduce((sum, t) => sum + t.data.byteLength, 0);
    expect(published.bytes).toBeLessThan(modelBytes / 4);

    // The LoRA replica holds the server's adapter, bit for bit, and answers as the server does.
    const adapter = await trained.engine.getWeights();
    const replicaAdapter = await tiny(0).engine.getWeights();
    expect(Object.keys(replicaAdapter).sort()).toEqual(Object.keys(adapter).sort());
    for (const name of Object.keys(adapter)) expect(Array.from(replicaAdapter[name].data)).toEqual(Array.from(adapter[name].data));
    const expected = await greedy(trained.engine);
    expect(await greedy(tiny(0).engine)).toEqual(expected);

    // The full replica serves the base with the delta merged in: the same tokens, the same logprobs up to rounding.
    const merged = await tiny(1).engine.getWeights();
    expect(tiny(1).engine.info.lora).toBeNull();
    const scale = LORA.alpha / LORA.rank;
    const a = adapter['base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight'].data;
    const b = adapter['base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight'].data;
    const inp = source[Q_PROJ].shape[1];
    let maxError = 0;
    let maxDelta = 0;
    source[Q_PROJ].data.forEach((w, k) => {
      const [o, i] = [Math.floor(k / inp), k % inp];
      let delta = 0;
      for (let r = 0; r < LORA.rank; r++) delta += b[o * LORA.rank + r] * a[r * inp + i];
      maxError = Math.max(maxError, Math.abs(w + scale * delta - merged[Q_PROJ].data[k]));
      maxDelta = Math.max(maxDelta, Math.abs(scale * delta));
    });
    expect(maxDelta).toBeGreaterThan(1e-3);
    expect(maxError).toBeLessThan(1e-5);
    const full = await greedy(tiny(1).engine);
    expect(full.ids).toEqual(expected.ids);
    expect(full.policyVersion).toBe(expected.policyVersion);
    full.logprobs.forEach((logprob, i) => expect(Math.abs(logprob - expected.logprobs[i])).toBeLessThan(1e-3));
    expect(full.logprobs).not.toEqual(before.logprobs);
    // Neither replica announces, signed as its own, the version it loaded: only the server's blob goes round.
    for (const replica of peers.replicas) expect(replica.p2p!.weights.published).toEqual([]);
  }, 120_000);

  it('refuses, on a LoRA replica, full weights and an adapter of another LoRA config', async () => {
    const model = tiny(0);
    const snapshot = async () => ({ state: model.state, policyVersion: model.policyVersion, adapter: await model.engine.getWeights() });
    const before = await snapshot();
    const offer = async (version: number, bytes: Uint8Array) => {
      const heard = nextFetched(peers.replicas[0], (entry) => entry.version === version);
      await peers.server.p2p!.node.weights.publish({ model: 'tiny', version, source: { bytes } });
      return heard;
    };

    const fullBlob = await offer(100, encodeWeightsBlob(source, { kind: 'full', model: 'tiny', version: 100 }));
    expect(fullBlob.refused?.code).toBe('kind_mismatch');

    const adapter = await peers.server.serving.models.find('tiny')!.engine.getWeights();
    const rank4: NamedTensors = {};
    for (const [name, t] of Object.entries(adapter)) {
      const shape = name.includes('lora_A') ? [4, t.shape[1]] : [t.shape[0], 4];
      rank4[name] = { shape, data: new Float32Array(shape[0] * shape[1]) };
    }
    const base = peers.server.p2p!.weights.published.at(-1)!;
    expect(base.kind).toBe('lora-adapter');
    const otherConfig = await offer(101, encodeWeightsBlob(rank4, { kind: 'lora-adapter', model: 'tiny', version: 101, base: 'f'.repeat(64), lora: { ...LORA, rank: 4 } }));
    expect(otherConfig.refused?.code).toBe('lora_config_mismatch');

    for (const entry of [fullBlob, otherConfig]) expect(entry.loaded).toBe(false);
    expect(await snapshot()).toEqual(before);
  }, 60_000);
});
