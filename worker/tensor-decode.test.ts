import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import { forward, fuseWeights, initWeights, seededRandom, toParams } from './model.ts';
import { decodeOnDevice, deviceDecodeWeights, disposeDeviceDecodeWeights, prefillOnDevice } from './tensor-decode.ts';
import { tinyConfig } from './testing/configs.ts';

// The device path is plain tf ops: it runs on wasm too, so CI checks it without a GPU (worker/webgpu.test.ts runs it
// on WebGPU where an adapter exists).
beforeAll(async () => {
  await selectBackend('wasm');
});

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

describe('decoding with device KV caches', () => {
  for (const variant of [{ name: 'qwen3 (q/k norm, tied)', over: {} }, { name: 'qwen2 (qkv bias, no q/k norm, untied)', over: { qk_norm: false, attention_bias: true, tie_word_embeddings: false } }]) {
    it(`two sequences of different lengths decoded together give each one's full-forward logits: ${variant.name}`, async () => {
      const cfg = tinyConfig(variant.over);
      const rand = seededRandom(9);
      const named = initWeights(cfg, 4);
      if (cfg.attention_bias) for (const [name, t] of Object.entries(named)) if (name.endsWith('bias')) t.data = Float32Array.from(t.data, () => (rand() * 2 - 1) * 0.1);
      const params = toParams(named);
      const w = fuseWeights(cfg, params);
      const dw = deviceDecodeWeights(cfg, params);
      const seqs = [
        [3, 17, 5, 22, 9, 30, 1, 8, 12, 39],
        [7, 2, 25, 11, 4, 33, 19, 6],
      ];
      const V = cfg.vocab_size;
      const full = seqs.map((s) => tf.tidy(() => forward(cfg, w, Int32Array.from(s), 1, s.length).dataSync()));
      const starts = [4, 2];
      const prefilled = await prefillOnDevice(cfg, w, seqs.map((s, i) => s.slice(0, starts[i])));
      prefilled.forEach(({ logits }, i) => expect(maxDiff(logits, full[i].slice((starts[i] - 1) * V, starts[i] * V))).toBeLessThan(1e-4));
      const caches = prefilled.map((p) => p.cache);
      for (let step = 0; step < 6; step++) {
        const positions = starts.map((s) => s + step);
        const logits = await decodeOnDevice(cfg, w, dw, caches, positions.map((pos, i) => seqs[i][pos]));
        positions.forEach((pos, i) => expect(maxDiff(logits.subarray(i * V, (i + 1) * V), full[i].slice(pos * V, (pos + 1) * V))).toBeLessThan(1e-4));
      }
      expect(caches.map((c) => c.length)).toEqual([10, 8]);
      for (const c of caches) c.dispose();
      disposeDeviceDecodeWeights(dw);
    });
  }
});
