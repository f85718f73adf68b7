import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import type { TrainMetrics, TrainSample } from './common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from './engine.ts';
import { ppoClipLoss } from './losses.ts';
import { forward, fuseWeights, initWeights, seededRandom, targetLogprobs, toParams } from './model.ts';
import { sampling, tinyByteConfig, tinyConfig } from './testing/configs.ts';
import { packMicroBatches } from './train.ts';
import { ByteTokenizer, IM_END_ID, IM_START_ID } from './tokenizer/byte-tokenizer.ts';

const engines: LocalEngine[] = [];
async function makeEngine(seed = 3, lora: Parameters<typeof createEngineFromWeights>[0]['lora'] = null): Promise<LocalEngine> {
  const cfg = tinyByteConfig();
  const e = await createEngineFromWeights({ name: 'test', config: cfg, weights: initWeights(cfg, seed), tokenizer: new ByteTokenizer(), backend: 'wasm', seed, lora });
  engines.push(e);
  return e;
}
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
});
beforeAll(async () => {
  await selectBackend('wasm');
});

const sumOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('PPO loss', () => {
  it('has the gradient finite differences give (through the whole model)', () => {
    const cfg = tinyConfig({ num_hidden_layers: 1 });
    const named = initWeights(cfg, 9);
    const params = toParams(named, true);
    const ids = Int32Array.from([1, 5, 9, 13, 2, 7]);
    const targets = Int32Array.from([5, 9, 13, 2, 7, 0]);
    const mask = tf.tensor1d([0, 1, 1, 1, 1, 0]);
    // Old logprobs away from the current ones so that some ratios clip and some do not.
    const baseLp = tf.tidy(() => targetLogprobs(forward(cfg, fuseWeights(cfg, params), ids, 1, 6), targets).arraySync());
    const old = tf.tensor1d(baseLp.map((v, i) => v + [0, 0.5, -0.05, 0.02, -0.6, 0][i]));
    const adv = tf.tensor1d([0, 1, -1, 0.5, 1, 0]);
    const loss = () => {
      const lp = targetLogprobs(forward(cfg, fuseWeights(cfg, params), ids, 1, 6), targets);
      return tf.div(tf.sum(tf.mul(ppoClipLoss(lp, old, adv, 0.2, 0.28).loss, mask)), 4) as tf.Scalar;
    };
    const probes: [string, number][] = [
      ['model.embed_tokens.weight', 5 * 64 + 3],
      ['model.layers.0.self_attn.q_proj.weight', 17],
      ['model.layers.0.mlp.down_proj.weight', 100],
      ['model.layers.0.self_attn.k_norm.weight', 2],
    ];
    const { grads } = tf.variableGrads(loss, probes.map(([n]) => params[n] as tf.Variable));
    for (const [name, index] of probes) {
      const v = params[name] as tf.Variable;
      const analytic = grads[v.name].dataSync()[index];
      const eps = 1e-2;
      const at = (delta: number) => {
        const data = (v.dataSync() as Float32Array).slice();
        data[index] += delta;
        v.assign(tf.tensor(data, v.shape));
        const l = tf.tidy(() => loss().dataSync()[0]);
        data[index] -= delta;
        v.assign(tf.tensor(data, v.shape));
        return l;
      };
      const numeric = (at(eps) - at(-eps)) / (2 * eps);
      expect(Math.abs(analytic - numeric)).toBeLessThan(2e-3 + 0.05 * Math.abs(numeric));
      expect(Math.abs(analytic)).toBeGreaterThan(1e-5); // the probe actually matters
    }
  });

  it('a positive advantage raises the rewarded tokens\' probability, a negative one lowers it', async () => {
    for (const sign of [1, -1]) {
      const engine = await makeEngine(4);
      const prompt = new ByteTokenizer().encode('prompt');
      const r = await engine.generate({ promptIds: prompt, sampling: sampling({ temperature: 1, seed: 1, maxTokens: 6 }) });
      const tokens = [...prompt, ...r.tokens.map((t) => t.id)];
      const gen = (xs: number[]) => xs.slice(prompt.length);
      const sample: TrainSample = {
        tokens,
        lossMask: tokens.map((_, i) => (i >= prompt.length ? 1 : 0)),
        advantages: tokens.map((_, i) => (i >= prompt.length ? sign : 0)),
        oldLogprobs: [...prompt.map(() => 0), ...r.tokens.map((t) => t.logprob)],
      };
      const before = sumOf(gen((await engine.logprobs([tokens]))[0]));
      const m = await engine.trainStep([sample], { loss: 'ppo', learningRate: 3e-3 });
      const after = sumOf(gen((await engine.logprobs([tokens]))[0]));
      expect(Math.sign(after - before)).toBe(sign);
      expect(m.trainedTokens).toBe(6);
      expect(m.policyVersion).toBe(1);
      expect(m.clipFraction).toBe(0); // first step: ratio is exactly 1
    }
  });

  it('reports KL against the reference snapshot once the policy moved', async () => {
    const engine = await makeEngine(5);
    await engine.snapshotReference();
    const tokens = new ByteTokenizer().encode('abcabcabc');
    const sample: TrainSample = { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 1), oldLogprobs: (await engine.logprobs([tokens]))[0] };
    const first = await engine.trainStep([sample], { klCoef: 0.1, learningRate: 1e-2 });
    expect(first.kl).toBeCloseTo(0, 6);
    const second = await engine.trainStep([sample], { klCoef: 0.1, learningRate: 1e-2 });
    expect(second.kl).toBeGreaterThan(0);
    expect(second.entropy).toBeGreaterThan(0);
  });

  it('adds an entropy bonus: with zero advantages the loss is minus the bonus, and steps raise the entropy', async () => {
    const tokens = new ByteTokenizer().encode('aaaaaaaaaaaa');
    const run = async (entropyCoef: number) => {
      const engine = await makeEngine(7);
      const sample: TrainSample = { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: (await engine.logprobs([tokens]))[0] };
      const options = { entropyCoef, normalization: 'token-mean' as const, learningRate: 1e-3 };
      const first = await engine.trainStep([sample], options);
      for (let i = 0; i < 4; i++) await engine.trainStep([sample], options);
      return { first, last: await engine.trainStep([sample], options) };
    };
    const off = await run(0);
    const on = await run(0.5);
    expect(off.first.loss).toBeCloseTo(0, 6);
    expect(on.first.loss).toBeCloseTo(-0.5 * on.first.entropy, 4);
    // Without a bonus and without advantages nothing moves; with one the policy spreads out.
    expect(off.last.entropy).toBeCloseTo(off.first.entropy, 4);
    expect(on.last.entropy).toBeGreaterThan(on.first.entropy);
  });
});

describe('micro-batching', () => {
  it('packs rows under the token budget, longest first', () => {
    const s = (n: number) => ({ tokens: new Array<number>(n).fill(1) });
    const batches = packMicroBatches([s(3), s(10), s(4), s(9), s(2)], 20);
    expect(batches.map((b) => b.map((x) => x.tokens.length))).toEqual([[10, 9], [4, 3, 2]]);
  });

  it('accumulated micro-batches give the same update as one batch (token-mean)', async () => {
    const tok = new ByteTokenizer();
    const samples: TrainSample[] = ['hello world', 'abc', 'a longer sample here'].map((text, k) => {
      const tokens = tok.encode(text);
      return { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => (k % 2 ? -1 : 1)), oldLogprobs: tokens.map(() => -5) };
    });
    const results: { m: TrainMetrics; lp: number[] }[] = [];
    for (const budget of [4096, 12]) {
      const e = await makeEngine(6);
      const m = await e.trainStep(samples, { microBatchTokens: budget, learningRate: 1e-2, maxGradNorm: 0 });
      results.push({ m, lp: (await e.logprobs([samples[0].tokens]))[0] });
    }
    expect(results[0].m.microBatches).toBe(1);
    expect(results[1].m.microBatches).toBe(3);
    expect(results[1].m.loss).toBeCloseTo(results[0].m.loss, 4);
    expect(results[1].m.gradNorm).toBeCloseTo(results[0].m.gradNorm, 3);
    results[0].lp.forEach((v, i) => expect(Math.abs(v - results[1].lp[i])).toBeLessThan(1e-3));
  });
});

describe('SFT', () => {
  it('learns to copy a 3-letter string: ≥ 90% exact copies within 100 steps', async () => {
    const engine = await makeEngine(7);
    const rand = seededRandom(99);
    const letters = 'abcd';
    const word = () => Array.from({ length: 3 }, () => letters.charCodeAt(Math.floor(rand() * 4)));
    const SEP = 124; // '|'
    const example = () => {
      const w = word();
      const tokens = [IM_START_ID, ...w, SEP, ...w, IM_END_ID];
      return { tokens, lossMask: tokens.map((_, i) => (i > w.length + 1 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) };
    };
    const accuracy = async () => {
      let ok = 0;
      const tests = Array.from({ length: 20 }, word);
      const results = await Promise.all(tests.map((w) => engine.generate({ promptIds: [IM_START_ID, ...w, SEP], sampling: sampling({ maxTokens: 4, stopTokenIds: [IM_END_ID] }) })));
      results.forEach((r, i) => (ok += JSON.stringify(r.tokens.map((t) => t.id)) === JSON.stringify([...tests[i], IM_END_ID]) ? 1 : 0));
      return ok / tests.length;
    };
    expect(await accuracy()).toBeLessThan(0.5);
    let acc = 0;
    let steps = 0;
    while (steps < 100) {
      await engine.trainStep(Array.from({ length: 16 }, example), { loss: 'sft', learningRate: 3e-3, weightDecay: 0 });
      steps++;
      if (steps % 25 === 0 && (acc = await accuracy()) >= 0.9) break;
    }
    expect(acc).toBeGreaterThanOrEqual(0.9);
  });
});

describe('LoRA', () => {
  it('trains only the adapters; merged weights give the same logprobs as base + adapter', async () => {
    const cfg = tinyByteConfig();
    const base = initWeights(cfg, 8);
    const lora = { rank: 4, alpha: 8, targetModules: ['q_proj', 'v_proj', 'down_proj'] };
    const engine = await createEngineFromWeights({ name: 't', config: cfg, weights: base, tokenizer: null, backend: 'wasm', lora, seed: 1 });
    engines.push(engine);
    expect(engine.info.trainableParamCount).toBeLessThan(engine.info.paramCount / 10);
    const tokens = new ByteTokenizer().encode('lora lora lora');
    const sample: TrainSample = { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) };
    for (let i = 0; i < 3; i++) await engine.trainStep([sample], { loss: 'sft', learningRate: 1e-2 });

    const adapters = await engine.getWeights();
    expect(Object.keys(adapters)).toContain('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight');
    expect(adapters['base_model.model.model.layers.1.mlp.down_proj.lora_B.weight'].shape).toEqual([64, 4]);
    const merged = await engine.mergedWeights();
    for (const [name, t] of Object.entries(base)) {
      const targeted = /(q_proj|v_proj|down_proj)\.weight$/.test(name);
      const changed = t.data.some((v, i) => Math.abs(v - merged[name].data[i]) > 1e-6);
      expect(changed, name).toBe(targeted);
    }
    const plain = await createEngineFromWeights({ name: 'merged', config: cfg, weights: merged, tokenizer: null, backend: 'wasm' });
    engines.push(plain);
    const [a] = await engine.logprobs([tokens]);
    const [b] = await plain.logprobs([tokens]);
    a.forEach((v, i) => expect(Math.abs(v - b[i])).toBeLessThan(1e-4));
    const [orig] = await (await makeEngine(8)).logprobs([tokens]);
    expect(sumOf(a)).toBeGreaterThan(sumOf(orig)); // the adapters learned something
  });
});
