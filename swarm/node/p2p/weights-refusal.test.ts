/**
 * A serving replica refuses, with a code, signed and hash-verified weights that do not fit its model — other shapes,
 * a version not newer than its own, an adapter trained on another base, a malformed blob — and changes nothing
 * then: same state, same version, same weights. What fits it loads: full weights, and a LoRA adapter merged into
 * the base it was trained on. The blobs are published by a real server peer and travel over loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NamedTensors } from '../../../worker/common/engine.ts';
import { readSourceWeights } from '../../../worker/node/load-model.ts';
import type { LogEntry } from '../log.ts';
import type { PeerRuntime } from '../runtime.ts';
import { baseFingerprint, encodeWeightsBlob } from './weights-blob.ts';
import type { BlobMeta } from './weights-blob.ts';
import type { FetchedWeights } from './weights-sync.ts';
import { nextFetched, startReplicaPeers, TINY_MODEL, type ReplicaPeers } from './testing/replica-peers.ts';

const Q_PROJ = 'model.layers.0.self_attn.q_proj.weight';
const V_PROJ = 'model.layers.1.self_attn.v_proj.weight';
const logged: LogEntry[] = [];
let peers: ReplicaPeers;
let server: PeerRuntime;
let replica: PeerRuntime;

beforeAll(async () => {
  // The server only publishes here (the blobs are made by the test); neither peer trains.
  peers = await startReplicaPeers({ name: 'refusal', server: { autoStart: false }, replicas: [{}] });
  server = peers.server;
  [replica] = peers.replicas;
  replica.log.onEntry((entry) => logged.push(entry));
}, 120_000);

afterAll(async () => {
  await peers?.stop();
});

/** The server signs and announces the bytes as tiny@version; resolves with the replica's record of them. */
async function offer(version: number, bytes: Uint8Array): Promise<FetchedWeights> {
  const heard = nextFetched(replica, (entry) => entry.version === version);
  await server.p2p!.node.weights.publish({ model: 'tiny', version, source: { bytes } });
  return heard;
}

const full = (tensors: NamedTensors, version: number) => encodeWeightsBlob(tensors, { kind: 'full', model: 'tiny', version });

/** What the replica serves: state, version and a fingerprint of every weight. */
async function served() {
  const model = replica.serving.models.find('tiny')!;
  return { state: model.state, policyVersion: model.policyVersion, weights: baseFingerprint(model.engine.info.config, await model.engine.getWeights()) };
}

function perturbed(tensors: NamedTensors, name: string, by: number): NamedTensors {
  const data = new Float32Array(tensors[name].data);
  for (let i = 0; i < data.length; i++) data[i] += by;
  return { ...tensors, [name]: { shape: [...tensors[name].shape], data } };
}

/** A rank-2 adapter over q_proj and v_proj of tiny, deterministic and non-zero. */
function adapter(weights: NamedTensors): { tensors: NamedTensors; lora: NonNullable<BlobMeta['lora']> } {
  const lora = { rank: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] };
  const tensors: NamedTensors = {};
  for (const base of Object.keys(weights).filter((n) => /\.(q_proj|v_proj)\.weight$/.test(n))) {
    const [out, inp] = weights[base].shape;
    const module = base.replace(/\.weight$/, '');
    const a = Float32Array.from({ length: lora.rank * inp }, (_, i) => Math.sin(i + 1) / 10);
    const b = Float32Array.from({ length: out * lora.rank }, (_, i) => Math.cos(i + 1) / 10);
    tensors[`base_model.model.${module}.lora_A.weight`] = { shape: [lora.rank, inp], data: a };
    tensors[`base_model.model.${module}.lora_B.weight`] = { shape: [out, lora.rank], data: b };
  }
  return { tensors, lora };
}

async function expectRefused(entry: FetchedWeights, code: string, before: Awaited<ReturnType<typeof served>>) {
  expect(entry.loaded).toBe(false);
  expect(entry.refused?.code).toBe(code);
  expect(await served()).toEqual(before);
  const listed = (await (await fetch(`http://127.0.0.1:${replica.port}/api/p2p/weights`, { headers: { authorization: `Bearer ${replica.token}` } })).json()) as {
    fetched: FetchedWeights[];
  };
  expect(listed.fetched.find((f) => f.version === entry.version)?.refused?.code).toBe(code);
  expect(logged.some((line) => line.msg === 'fetched weights refused' && line.code === code && line.version === entry.version)).toBe(true);
}

describe('a serving replica offered weights', () => {
  let source: NamedTensors;

  beforeAll(async () => {
    source = await server.serving.models.find('tiny')!.engine.getWeights();
  });

  it('refuses tensors whose shapes do not fit its model, and changes nothing', async () => {
    const before = await served();
    const [out, inp] = source[Q_PROJ].shape;
    const cut = { ...source, [Q_PROJ]: { shape: [out - 1, inp], data: source[Q_PROJ].data.slice(0, (out - 1) * inp) } };
    await expectRefused(await offer(10, full(cut, 10)), 'shape_mismatch', before);
    const { [Q_PROJ]: _missing, ...short } = source;
    await expectRefused(await offer(11, full(short, 11)), 'shape_mismatch', before);
  }, 60_000);

  it('refuses a blob that is no safetensors file, or names another version than its manifest', async () => {
    const before = await served();
    await expectRefused(await offer(12, new TextEncoder().encode('not weights at all')), 'invalid_blob', before);
    await expectRefused(await offer(13, full(source, 99)), 'version_mismatch', before);
  }, 60_000);

  it('loads newer full weights that fit, then refuses an older version', async () => {
    const newer = perturbed(source, Q_PROJ, 0.01);
    const loaded = await offer(20, full(newer, 20));
    expect(loaded.refused).toBeUndefined();
    expect(loaded.loaded).toBe(true);
    const model = replica.serving.models.find('tiny')!;
    expect(model.policyVersion).toBe(20);
    expect(Array.from((await model.engine.getWeights())[Q_PROJ].data)).toEqual(Array.from(newer[Q_PROJ].data));

    const before = await served();
    await expectRefused(await offer(15, full(source, 15)), 'older_version', before);
  }, 60_000);

  it('refuses a LoRA adapter trained on another base than the weights it serves', async () => {
    const before = await served();
    const { tensors, lora } = adapter(source);
    // The source's weights are the base here, but the replica now serves version 20's.
    const { config, weights } = await readSourceWeights(TINY_MODEL.source);
    const sourceBase = baseFingerprint(config, weights)!;
    const meta: BlobMeta = { kind: 'lora-adapter', model: 'tiny', version: 30, base: sourceBase, lora };
    await expectRefused(await offer(30, encodeWeightsBlob(tensors, meta)), 'lora_base_mismatch', before);
    const unnamed: BlobMeta = { kind: 'lora-adapter', model: 'tiny', version: 31, lora };
    await expectRefused(await offer(31, encodeWeightsBlob(tensors, unnamed)), 'lora_base_mismatch', before);
  }, 60_000);

  it('refuses an adapter whose shapes do not fit, and merges one that does into the base it was trained on', async () => {
    const model = replica.serving.models.find('tiny')!;
    const base = await model.engine.getWeights();
    const fingerprint = baseFingerprint(model.engine.info.config, base)!;
    const { tensors, lora } = adapter(source);

    const before = await served();
    const wrongRank = { ...lora, rank: 3 };
    await expectRefused(await offer(40, encodeWeightsBlob(tensors, { kind: 'lora-adapter', model: 'tiny', version: 40, base: fingerprint, lora: wrongRank })), 'shape_mismatch', before);

    const loaded = await offer(41, encodeWeightsBlob(tensors, { kind: 'lora-adapter', model: 'tiny', version: 41, base: fingerprint, lora }));
    expect(loaded.refused).toBeUndefined();
    expect(loaded.loaded).toBe(true);
    expect(model.policyVersion).toBe(41);
    const merged = await model.engine.getWeights();
    const scale = lora.alpha / lora.rank;
    for (const name of [Q_PROJ, V_PROJ]) {
      const [out, inp] = base[name].shape;
      const module = name.replace(/\.weight$/, '');
      const a = tensors[`base_model.model.${module}.lora_A.weight`].data;
      const b = tensors[`base_model.model.${module}.lora_B.weight`].data;
      const expected = Array.from(base[name].data, (w, k) => {
        const [o, i] = [Math.floor(k / inp), k % inp];
        let delta = 0;
        for (let r = 0; r < lora.rank; r++) delta += b[o * lora.rank + r] * a[r * inp + i];
        return w + scale * delta;
      });
      expect(out * inp).toBe(expected.length);
      const got = merged[name].data;
      expect(Math.max(...expected.map((e, k) => Math.abs(e - got[k])))).toBeLessThan(1e-5);
    }
    // Weights the adapter does not target stay the base's.
    const untouched = 'model.layers.0.self_attn.k_proj.weight';
    expect(Array.from(merged[untouched].data)).toEqual(Array.from(base[untouched].data));

    // The next adapter goes onto the same base, not onto the merged weights.
    const next = { ...tensors };
    for (const name of Object.keys(next).filter((n) => n.includes('lora_B'))) next[name] = { shape: next[name].shape, data: new Float32Array(next[name].data.length) };
    const reloaded = await offer(42, encodeWeightsBlob(next, { kind: 'lora-adapter', model: 'tiny', version: 42, base: fingerprint, lora }));
    expect(reloaded.loaded).toBe(true);
    expect(Array.from((await model.engine.getWeights())[Q_PROJ].data)).toEqual(Array.from(base[Q_PROJ].data));
    // Loaded from the server, announced by it alone.
    expect(replica.p2p!.weights.published).toEqual([]);
  }, 60_000);
});
