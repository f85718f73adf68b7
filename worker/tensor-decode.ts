/**
 * Incremental decoding for backends that cannot read synchronously (WebGPU under Node): the KV cache stays on the
 * device as tensors and the attention of a decode step is tf ops, so a step reads back one thing, its logits, with
 * `await data()`. model.ts's `decodeStep` (host-side attention over host caches) stays the wasm/cpu path, where a
 * JS loop beats dozens of small tensor ops.
 *
 * Each sequence keeps, per layer, its keys and values after RoPE as [len, KVH·hd] tensors; a step appends one row
 * (a copy on the device: tfjs has no in-place update) and attends per sequence with batched matmuls over its kv
 * heads. The weight matmuls stay batched across sequences.
 */
import * as tf from '@tensorflow/tfjs';
import type { DecoderConfig } from './common/engine.ts';
import { ContextLengthError, forward, type LayerKv, linear, type ModelWeights, paddedPrompts, rmsNorm, ropeTables } from './model.ts';

/** Keys/values of one sequence on the device: per layer [length, KVH·hd]. Release with `dispose`. */
export class TensorKvCache {
  constructor(
    public length: number,
    readonly k: tf.Tensor2D[],
    readonly v: tf.Tensor2D[],
  ) {}
  dispose(): void {
    tf.dispose([...this.k, ...this.v]);
    this.k.length = 0;
    this.v.length = 0;
  }
}

/** Prefill prompts in one right-padded forward (as model.ts's prefillBatch): per prompt a device cache and its last logits [V]. */
export async function prefillOnDevice(cfg: DecoderConfig, w: ModelWeights, prompts: number[][]): Promise<{ cache: TensorKvCache; logits: Float32Array }[]> {
  const { ids, b, t } = paddedPrompts(cfg, prompts);
  const rowSize = cfg.num_key_value_heads * cfg.head_dim;
  let caches: TensorKvCache[] = [];
  const last = tf.tidy(() => {
    const kv: LayerKv[] = [];
    const logits = forward(cfg, w, ids, b, t, kv); // [B·T, V]
    const lastRows = Int32Array.from(prompts, (p, row) => row * t + p.length - 1);
    caches = prompts.map((p, row) => {
      const rows = (x: tf.Tensor4D) => tf.keep(tf.reshape(tf.slice(x, [row, 0, 0, 0], [1, p.length, -1, -1]), [p.length, rowSize]) as tf.Tensor2D);
      return new TensorKvCache(
        p.length,
        kv.map((l) => rows(l.k)),
        kv.map((l) => rows(l.v)),
      );
    });
    tf.dispose(kv.flatMap((l) => [l.k, l.v])); // kept by attention(); the slices above are copies
    return tf.gather(logits, tf.tensor1d(lastRows, 'int32')) as tf.Tensor2D;
  });
  const data = (await last.data()) as Float32Array;
  last.dispose();
  const vocab = cfg.vocab_size;
  return caches.map((cache, row) => ({ cache, logits: data.slice(row * vocab, (row + 1) * vocab) }));
}

/** x [n, heads, hd] rotated by per-row cos/sin [n, 1, hd] (HF's rotate-half convention). */
function rotate(x: tf.Tensor3D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor3D {
  const [x1, x2] = tf.split(x, 2, 2);
  return tf.add(tf.mul(x, cos), tf.mul(tf.concat([tf.neg(x2), x1], 2), sin)) as tf.Tensor3D;
}

/**
 * One decode step for a batch of sequences: `tokens[i]` is appended at position `caches[i].length`. Returns
 * logits [n, V] (row-major) and advances every cache by one.
 */
export async function decodeOnDevice(cfg: DecoderConfig, w: ModelWeights, caches: TensorKvCache[], tokens: number[]): Promise<Float32Array> {
  const n = tokens.length;
  const { num_attention_heads: h, num_key_value_heads: kvh, head_dim: hd } = cfg;
  const rep = h / kvh;
  for (const c of caches) {
    if (c.length >= cfg.max_position_embeddings) throw new ContextLengthError(`sequence reached the context of ${cfg.max_position_embeddings}`);
  }
  const tables = ropeTables(hd, cfg.rope_theta, caches.map((c) => c.length));
  const newK: tf.Tensor2D[][] = caches.map(() => []);
  const newV: tf.Tensor2D[][] = caches.map(() => []);
  const logitsT = tf.tidy(() => {
    const cos = tf.tensor3d(tables.cos, [n, 1, hd]);
    const sin = tf.tensor3d(tables.sin, [n, 1, hd]);
    let x = tf.gather(w.embed, tf.tensor1d(Int32Array.from(tokens), 'int32')) as tf.Tensor2D; // [n, D]
    for (let l = 0; l < w.layers.length; l++) {
      const lw = w.layers[l];
      const xn = rmsNorm(x, lw.inputNorm, cfg.rms_norm_eps);
      const project = (weight: tf.Tensor2D, bias: tf.Tensor1D | null, heads: number) => tf.reshape(bias ? tf.add(linear(xn, weight), bias) : linear(xn, weight), [n, heads, hd]) as tf.Tensor3D;
      let q = project(lw.q, lw.qBias, h);
      let k = project(lw.k, lw.kBias, kvh);
      const v = project(lw.v, lw.vBias, kvh);
      if (lw.qNorm) q = rmsNorm(q, lw.qNorm, cfg.rms_norm_eps);
      if (lw.kNorm) k = rmsNorm(k, lw.kNorm, cfg.rms_norm_eps);
      q = tf.mul(rotate(q, cos, sin), 1 / Math.sqrt(hd)) as tf.Tensor3D;
      k = rotate(k, cos, sin);
      const kRows = tf.unstack(tf.reshape(k, [n, 1, kvh * hd])) as tf.Tensor2D[];
      const vRows = tf.unstack(tf.reshape(v, [n, 1, kvh * hd])) as tf.Tensor2D[];
      const qRows = tf.unstack(q) as tf.Tensor2D[]; // n × [H, hd]
      const outs = caches.map((cache, i) => {
        const kc = tf.keep(tf.concat([cache.k[l], kRows[i]], 0) as tf.Tensor2D); // [len + 1, KVH·hd]
        const vc = tf.keep(tf.concat([cache.v[l], vRows[i]], 0) as tf.Tensor2D);
        newK[i].push(kc);
        newV[i].push(vc);
        const len = cache.length + 1;
        const heads = (c: tf.Tensor2D) => tf.transpose(tf.reshape(c, [len, kvh, hd]), [1, 0, 2]) as tf.Tensor3D; // [KVH, len, hd]
        const qi = tf.reshape(qRows[i], [kvh, rep, hd]) as tf.Tensor3D; // query heads grouped by kv head
        const p = tf.softmax(tf.matMul(qi, heads(kc), false, true)); // [KVH, rep, len]
        return tf.reshape(tf.matMul(p, heads(vc)), [1, h * hd]); // [1, H·hd]
      });
      const attn = (n === 1 ? outs[0] : tf.concat(outs, 0)) as tf.Tensor2D; // [n, H·hd]
      const y = tf.add(x, linear(attn, lw.o)) as tf.Tensor2D;
      const yn = rmsNorm(y, lw.postNorm, cfg.rms_norm_eps);
      const g = linear(yn, lw.gate);
      x = tf.add(y, linear(tf.mul(tf.mul(g, tf.sigmoid(g)), linear(yn, lw.up)) as tf.Tensor2D, lw.down)) as tf.Tensor2D;
    }
    return linear(rmsNorm(x, w.norm, cfg.rms_norm_eps), w.head); // [n, V]
  });
  caches.forEach((cache, i) => {
    tf.dispose([...cache.k, ...cache.v]);
    cache.k.splice(0, cache.k.length, ...newK[i]);
    cache.v.splice(0, cache.v.length, ...newV[i]);
    cache.length += 1;
  });
  const logits = (await logitsT.data()) as Float32Array;
  logitsT.dispose();
  return logits;
}
