import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import { tinyConfig } from './testing/configs.ts';
import { applyRope, attention, decodeHostWeights, decodeStep, forward, fuseWeights, initWeights, mlp, prefill, prefillBatch, rmsNorm, ropeTables, seededRandom, toParams } from './model.ts';

const rand = seededRandom(7);
const randArray = (n: number) => Array.from({ length: n }, () => rand() * 2 - 1);

// float64 references, written the slow obvious way
function refRmsNorm(x: number[], w: number[], eps: number): number[] {
  const ms = x.reduce((a, v) => a + v * v, 0) / x.length;
  return x.map((v, i) => (v / Math.sqrt(ms + eps)) * w[i]);
}
function refRope(x: number[], pos: number, theta: number): number[] {
  const hd = x.length;
  const half = hd / 2;
  const out = new Array<number>(hd);
  for (let i = 0; i < half; i++) {
    const a = pos * Math.pow(theta, (-2 * i) / hd);
    out[i] = x[i] * Math.cos(a) - x[i + half] * Math.sin(a);
    out[i + half] = x[i + half] * Math.cos(a) + x[i] * Math.sin(a);
  }
  return out;
}
/** y = x @ W^T for W in HF layout [out, in]. */
function refLinear(x: number[], w: Float32Array, out: number): number[] {
  const inp = x.length;
  return Array.from({ length: out }, (_, o) => x.reduce((a, v, i) => a + v * w[o * inp + i], 0));
}
function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

beforeAll(async () => {
  await selectBackend('wasm');
});

describe('decoder blocks against float64 references', () => {
  it('RMSNorm', () => {
    const x = randArray(3 * 8);
    const w = randArray(8);
    const got = tf.tidy(() => rmsNorm(tf.tensor2d(x, [3, 8]), tf.tensor1d(w), 1e-6).dataSync());
    const want = [0, 1, 2].flatMap((r) => refRmsNorm(x.slice(r * 8, r * 8 + 8), w, 1e-6));
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
  });

  it('RoPE rotates each head by its position', () => {
    const [b, t, nh, hd] = [2, 5, 3, 8];
    const x = randArray(b * t * nh * hd);
    const tables = ropeTables(hd, 10000, [0, 1, 2, 3, 4]);
    const got = tf.tidy(() => applyRope(tf.tensor4d(x, [b, t, nh, hd]), tf.tensor2d(tables.cos, [t, hd]), tf.tensor2d(tables.sin, [t, hd])).dataSync());
    const want: number[] = [];
    for (let bi = 0; bi < b; bi++) for (let ti = 0; ti < t; ti++) for (let h = 0; h < nh; h++) {
      const o = ((bi * t + ti) * nh + h) * hd;
      want.push(...refRope(x.slice(o, o + hd), ti, 10000));
    }
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
  });

  it('attention with grouped-query heads, q/k norm and qkv bias', () => {
    const cfg = tinyConfig({ attention_bias: true });
    const named = initWeights(cfg, 3);
    // Non-trivial norm weights and biases so that they matter.
    for (const [name, t] of Object.entries(named)) if (name.includes('norm') || name.endsWith('bias')) t.data = Float32Array.from(randArray(t.data.length));
    const [b, t] = [2, 6];
    const d = cfg.hidden_size;
    const x = randArray(b * t * d);
    const got = tf.tidy(() => {
      const w = fuseWeights(cfg, toParams(named));
      const tables = ropeTables(cfg.head_dim, cfg.rope_theta, [0, 1, 2, 3, 4, 5]);
      const rope = { cos: tf.tensor2d(tables.cos, [t, cfg.head_dim]), sin: tf.tensor2d(tables.sin, [t, cfg.head_dim]) };
      return attention(cfg, w.layers[0], tf.tensor2d(x, [b * t, d]), b, t, rope, null).dataSync();
    });
    const { num_attention_heads: h, num_key_value_heads: kvh, head_dim: hd } = cfg;
    const W = (n: string) => named[`model.layers.0.self_attn.${n}`].data;
    const want: number[] = [];
    for (let bi = 0; bi < b; bi++) {
      const rows = Array.from({ length: t }, (_, ti) => x.slice((bi * t + ti) * d, (bi * t + ti + 1) * d));
      const proj = (n: string, out: number) => rows.map((r) => refLinear(r, W(`${n}.weight`), out).map((v, i) => v + W(`${n}.bias`)[i]));
      const q = proj('q_proj', h * hd);
      const k = proj('k_proj', kvh * hd);
      const v = proj('v_proj', kvh * hd);
      const head = (m: number[][], ti: number, hh: number) => m[ti].slice(hh * hd, hh * hd + hd);
      const qh = (ti: number, hh: number) => refRope(refRmsNorm(head(q, ti, hh), Array.from(W('q_norm.weight')), 1e-6), ti, 10000);
      const kh = (ti: number, g: number) => refRope(refRmsNorm(head(k, ti, g), Array.from(W('k_norm.weight')), 1e-6), ti, 10000);
      for (let ti = 0; ti < t; ti++) {
        const merged: number[] = [];
        for (let hh = 0; hh < h; hh++) {
          const g = Math.floor(hh / (h / kvh));
          const s = Array.from({ length: ti + 1 }, (_, j) => qh(ti, hh).reduce((a, qv, dd) => a + qv * kh(j, g)[dd], 0) / Math.sqrt(hd));
          const mx = Math.max(...s);
          const e = s.map((z) => Math.exp(z - mx));
          const sum = e.reduce((a, z) => a + z, 0);
          for (let dd = 0; dd < hd; dd++) merged.push(e.reduce((a, p, j) => a + (p / sum) * head(v, j, g)[dd], 0));
        }
        want.push(...refLinear(merged, W('o_proj.weight'), d));
      }
    }
    expect(maxDiff(got, want)).toBeLessThan(1e-4);
  });

  it('SwiGLU MLP', () => {
    const cfg = tinyConfig();
    const named = initWeights(cfg, 4);
    const x = randArray(3 * cfg.hidden_size);
    const got = tf.tidy(() => mlp(fuseWeights(cfg, toParams(named)).layers[1], tf.tensor2d(x, [3, cfg.hidden_size])).dataSync());
    const W = (n: string) => named[`model.layers.1.mlp.${n}.weight`].data;
    const want = [0, 1, 2].flatMap((r) => {
      const row = x.slice(r * cfg.hidden_size, (r + 1) * cfg.hidden_size);
      const g = refLinear(row, W('gate_proj'), cfg.intermediate_size);
      const u = refLinear(row, W('up_proj'), cfg.intermediate_size);
      return refLinear(g.map((gv, i) => (gv / (1 + Math.exp(-gv))) * u[i]), W('down_proj'), cfg.hidden_size);
    });
    expect(maxDiff(got, want)).toBeLessThan(1e-5);
  });
});

describe('KV cache', () => {
  for (const variant of [{ name: 'qwen3 (q/k norm, tied)', over: {} }, { name: 'qwen2 (qkv bias, untied)', over: { qk_norm: false, attention_bias: true, tie_word_embeddings: false } }]) {
    it(`prefill + incremental decode gives the full forward's logits: ${variant.name}`, () => {
      const cfg = tinyConfig(variant.over);
      const named = initWeights(cfg, 5);
      if (cfg.attention_bias) for (const [name, t] of Object.entries(named)) if (name.endsWith('bias')) t.data = Float32Array.from(randArray(t.data.length)).map((v) => v * 0.1);
      const params = toParams(named);
      const w = fuseWeights(cfg, params);
      const seq = [3, 17, 5, 22, 9, 30, 1, 8, 12, 39];
      const full = tf.tidy(() => forward(cfg, w, Int32Array.from(seq), 1, seq.length).dataSync());
      const V = cfg.vocab_size;
      const { cache, logits } = prefill(cfg, w, seq.slice(0, 4));
      expect(maxDiff(logits, full.slice(3 * V, 4 * V))).toBeLessThan(1e-4);
      const host = decodeHostWeights(cfg, params);
      for (let t = 4; t < seq.length; t++) {
        const step = decodeStep(cfg, w, host, [cache], [seq[t]]);
        expect(maxDiff(step, full.slice(t * V, (t + 1) * V))).toBeLessThan(1e-4);
      }
      expect(cache.length).toBe(seq.length);
    });
  }

  it('prefilling prompts of different lengths together gives what each gives alone', () => {
    const cfg = tinyConfig();
    const w = fuseWeights(cfg, toParams(initWeights(cfg, 6)));
    const prompts = [[3, 17, 5], [9, 30, 1, 8, 12, 39, 2], [22]];
    const together = prefillBatch(cfg, w, prompts);
    prompts.forEach((p, i) => {
      const alone = prefill(cfg, w, p);
      expect(together[i].cache.length).toBe(p.length);
      expect(maxDiff(together[i].logits, alone.logits)).toBeLessThan(1e-5);
      for (let l = 0; l < cfg.num_hidden_layers; l++) {
        const [a, b] = [together[i].cache.read(l), alone.cache.read(l)];
        expect(maxDiff(a.k, b.k)).toBeLessThan(1e-5);
        expect(maxDiff(a.v, b.v)).toBeLessThan(1e-5);
      }
    });
  });
});
