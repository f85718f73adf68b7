/**
 * A Llama / Qwen2 / Qwen3-family decoder in TensorFlow.js, written to be read top to bottom.
 *
 * Blocks in dependency order: RMSNorm → RoPE → attention (grouped-query, optional q/k norm and qkv bias) →
 * SwiGLU MLP → block → model. One forward serves training (full causal sequence, per-token outputs) and the
 * sampler's prefill; `decodeStep` serves incremental decoding with a per-sequence KV cache.
 *
 * References: "Attention Is All You Need" (Vaswani et al. 2017), RoFormer (Su et al. 2021, rotary embeddings),
 * GQA (Ainslie et al. 2023), GLU variants (Shazeer 2020), and the Hugging Face `modeling_llama` / `modeling_qwen3`
 * layouts whose parameter names we keep so that checkpoints load directly.
 *
 * Layout note: Hugging Face stores a Linear weight as [out, in]. We keep every Linear weight *transposed*, [in, out],
 * in memory, because the wasm backend's matmul with a transposed operand is ~10x slower than a plain one (measured:
 * 512³ takes 10 ms plain, 111 ms with transposeB). `toInternal` / `toHuggingFace` convert at the boundary
 * (load, save, getWeights, setWeights). For the same reason `linear` has a custom gradient that transposes explicitly.
 */
import * as tf from '@tensorflow/tfjs';
import { checkDecoderTensors, decoderTensorShapes } from './checkpoint/decoder-tensors.ts';
import type { DecoderConfig, NamedTensors } from './common/engine.ts';
import { seededRandom } from './common/random.ts';

// ---------------------------------------------------------------------------------------------------------------
// Parameters: names, shapes, initialisation

/** Parameters by Hugging Face name, Linear weights in [in, out] layout (see the header). */
export type Params = Record<string, tf.Tensor>;

export class ContextLengthError extends Error {
  override name = 'ContextLengthError';
}
export class InvalidConfigError extends Error {
  override name = 'InvalidConfigError';
}

/** Linear layers of one block, by HF module name. */
export const LINEAR_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;

export function layerPrefix(i: number): string {
  return `model.layers.${i}.`;
}

/** Is this parameter a Linear weight (stored transposed in memory)? */
export function isLinearWeight(name: string): boolean {
  return name === 'lm_head.weight' || /_proj\.weight$/.test(name);
}

export function countParameters(cfg: DecoderConfig): number {
  let n = 0;
  for (const shape of Object.values(decoderTensorShapes(cfg))) n += shape.reduce((a, b) => a * b, 1);
  return n;
}

export function validateConfig(cfg: DecoderConfig): void {
  const check = (ok: boolean, what: string) => {
    if (!ok) throw new InvalidConfigError(`invalid decoder config: ${what}`);
  };
  for (const k of ['vocab_size', 'hidden_size', 'num_hidden_layers', 'num_attention_heads', 'num_key_value_heads', 'head_dim', 'intermediate_size', 'max_position_embeddings'] as const) {
    check(Number.isInteger(cfg[k]) && cfg[k] > 0, `${k} must be a positive integer (got ${cfg[k]})`);
  }
  check(cfg.num_attention_heads % cfg.num_key_value_heads === 0, 'num_attention_heads must be a multiple of num_key_value_heads');
  check(cfg.head_dim % 2 === 0, 'head_dim must be even (RoPE rotates pairs)');
}

export { seededRandom };

export function gaussianArray(n: number, std: number, rand: () => number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    // Box–Muller: two normals per two uniforms.
    const u = Math.max(rand(), 1e-12);
    const r = Math.sqrt(-2 * Math.log(u)) * std;
    const theta = 2 * Math.PI * rand();
    out[i] = r * Math.cos(theta);
    if (i + 1 < n) out[i + 1] = r * Math.sin(theta);
  }
  return out;
}

/**
 * Random init in Hugging Face layout (GPT-2 style: N(0, 0.02), residual projections scaled by 1/sqrt(2·layers)
 * so the residual stream's variance does not grow with depth; norms at 1, biases at 0).
 */
export function initWeights(cfg: DecoderConfig, seed: number): NamedTensors {
  validateConfig(cfg);
  const rand = seededRandom(seed);
  const std = 0.02;
  const residualStd = std / Math.sqrt(2 * cfg.num_hidden_layers);
  const out: NamedTensors = {};
  for (const [name, shape] of Object.entries(decoderTensorShapes(cfg))) {
    const n = shape.reduce((a, b) => a * b, 1);
    let data: Float32Array;
    if (name.endsWith('norm.weight')) data = new Float32Array(n).fill(1);
    else if (name.endsWith('.bias')) data = new Float32Array(n);
    else if (name.endsWith('o_proj.weight') || name.endsWith('down_proj.weight')) data = gaussianArray(n, residualStd, rand);
    else data = gaussianArray(n, std, rand);
    out[name] = { shape, data };
  }
  return out;
}

/** Transpose a row-major [rows, cols] matrix. */
export function transpose2d(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let r = 0; r < rows; r++) {
    const base = r * cols;
    for (let c = 0; c < cols; c++) out[c * rows + r] = data[base + c];
  }
  return out;
}

/** One HF-layout tensor → internal layout (Linear weights transposed to [in, out]). */
export function toInternal(name: string, t: { shape: number[]; data: Float32Array }): { shape: number[]; data: Float32Array } {
  if (!isLinearWeight(name)) return t;
  const [out, inp] = t.shape;
  return { shape: [inp, out], data: transpose2d(t.data, out, inp) };
}

/** Internal layout → HF layout. */
export function toHuggingFace(name: string, t: { shape: number[]; data: Float32Array }): { shape: number[]; data: Float32Array } {
  if (!isLinearWeight(name)) return t;
  const [inp, out] = t.shape;
  return { shape: [out, inp], data: transpose2d(t.data, inp, out) };
}

/** Every tensor `cfg` needs is present with its HF shape (MissingTensorError / TensorShapeError otherwise). */
export const checkWeights = checkDecoderTensors;

// ---------------------------------------------------------------------------------------------------------------
// Primitive ops with gradients that suit the wasm backend

/** tf.customGrad's function type (not exported by @tensorflow/tfjs). */
type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** y = x @ w for x [N, in], w [in, out]; the gradient transposes explicitly (fast path on wasm). */
export function linear(x: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor2D {
  const f = tf.customGrad(((xIn: tf.Tensor, wIn: tf.Tensor, save: tf.GradSaveFunc) => {
    save([xIn, wIn]);
    return {
      value: tf.matMul(xIn as tf.Tensor2D, wIn as tf.Tensor2D),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, ws] = saved as tf.Tensor2D[];
        return [tf.matMul(dy as tf.Tensor2D, tf.transpose(ws)), tf.matMul(tf.transpose(xs), dy as tf.Tensor2D)];
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(x, w) as tf.Tensor2D;
}

/**
 * Embedding lookup with a gradient that does not need UnsortedSegmentSum (missing on wasm): the backward pass
 * scatter-adds dy rows into a dense [V, D] gradient in plain JS (N·D adds; a one-hot matmul would be N·V·D).
 */
export function embed(table: tf.Tensor2D, ids: Int32Array): tf.Tensor2D {
  const [v, d] = table.shape;
  const f = tf.customGrad(((tableIn: tf.Tensor) => ({
    value: tf.gather(tableIn, tf.tensor1d(ids, 'int32')),
    gradFunc: (dy: tf.Tensor) => {
      const dyData = dy.dataSync() as Float32Array; // [N, D]
      const grad = new Float32Array(v * d);
      for (let n = 0; n < ids.length; n++) {
        const src = n * d;
        const dst = ids[n] * d;
        for (let j = 0; j < d; j++) grad[dst + j] += dyData[src + j];
      }
      return [tf.tensor2d(grad, [v, d])];
    },
  })) as unknown as CustomGradientFunc);
  return f(table) as tf.Tensor2D;
}

// ---------------------------------------------------------------------------------------------------------------
// RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) · w, over the last axis

export function rmsNorm<T extends tf.Tensor>(x: T, w: tf.Tensor, eps: number): T {
  const ms = tf.mean(tf.square(x), -1, true); // [..., 1]
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(ms, eps))), w) as T;
}

// ---------------------------------------------------------------------------------------------------------------
// RoPE, Hugging Face "rotate half" convention: dims i and i + hd/2 form a rotating pair with frequency theta^(-2i/hd).

/** Per-position cos/sin rows [T, hd] (each frequency repeated for both halves), computed in float64. */
export function ropeTables(headDim: number, theta: number, positions: number[]): { cos: Float32Array; sin: Float32Array } {
  const half = headDim / 2;
  const cos = new Float32Array(positions.length * headDim);
  const sin = new Float32Array(positions.length * headDim);
  for (let t = 0; t < positions.length; t++) {
    for (let i = 0; i < half; i++) {
      const angle = positions[t] * Math.pow(theta, (-2 * i) / headDim);
      const c = Math.cos(angle);
      const s = Math.sin(angle);
      cos[t * headDim + i] = c;
      cos[t * headDim + i + half] = c;
      sin[t * headDim + i] = s;
      sin[t * headDim + i + half] = s;
    }
  }
  return { cos, sin };
}

/** rotate_half as a fixed matrix R [hd, hd]: (x @ R) = concat(-x2, x1). One matmul instead of four small ops. */
function rotateHalfMatrix(headDim: number): Float32Array {
  const half = headDim / 2;
  const r = new Float32Array(headDim * headDim);
  for (let i = 0; i < half; i++) {
    r[(i + half) * headDim + i] = -1; // out[i] = -x[i + half]
    r[i * headDim + i + half] = 1; // out[i + half] = x[i]
  }
  return r;
}

/** x [B, T, nh, hd] rotated by position: x·cos + rotate_half(x)·sin, with cos/sin [T, hd]. */
export function applyRope(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
  const [b, t, nh, hd] = x.shape;
  const rot = linear(tf.reshape(x, [b * t * nh, hd]), tf.tensor2d(rotateHalfMatrix(hd), [hd, hd])); // [B·T·nh, hd]
  const cos4 = tf.reshape(cos, [1, t, 1, hd]);
  const sin4 = tf.reshape(sin, [1, t, 1, hd]);
  return tf.add(tf.mul(x, cos4), tf.mul(tf.reshape(rot, [b, t, nh, hd]), sin4)) as tf.Tensor4D;
}

// ---------------------------------------------------------------------------------------------------------------
// Fused weights: q/k/v and gate/up concatenated so each is one matmul (small ops dominate on CPU backends)

export interface LayerWeights {
  inputNorm: tf.Tensor1D;
  qkv: tf.Tensor2D; // [D, (H + 2·KVH)·hd]
  qkvBias: tf.Tensor1D | null; // [(H + 2·KVH)·hd]
  qkNorm: tf.Tensor2D | null; // [H + KVH, hd]: q_norm repeated per q head, then k_norm per kv head
  o: tf.Tensor2D; // [H·hd, D]
  postNorm: tf.Tensor1D;
  gateUp: tf.Tensor2D; // [D, 2·I]
  down: tf.Tensor2D; // [I, D]
}

export interface ModelWeights {
  embed: tf.Tensor2D; // [V, D]
  layers: LayerWeights[];
  norm: tf.Tensor1D;
  head: tf.Tensor2D; // [D, V]
}

/** Build the fused view of `p` (differentiable: concat's gradient is a slice). */
export function fuseWeights(cfg: DecoderConfig, p: Params): ModelWeights {
  const h = cfg.num_attention_heads;
  const kvh = cfg.num_key_value_heads;
  const hd = cfg.head_dim;
  const layers: LayerWeights[] = [];
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const pre = layerPrefix(i);
    const a = pre + 'self_attn.';
    layers.push({
      inputNorm: p[pre + 'input_layernorm.weight'] as tf.Tensor1D,
      qkv: tf.concat([p[a + 'q_proj.weight'], p[a + 'k_proj.weight'], p[a + 'v_proj.weight']], 1) as tf.Tensor2D,
      qkvBias: cfg.attention_bias ? (tf.concat([p[a + 'q_proj.bias'], p[a + 'k_proj.bias'], p[a + 'v_proj.bias']], 0) as tf.Tensor1D) : null,
      qkNorm: cfg.qk_norm
        ? (tf.concat([tf.broadcastTo(tf.reshape(p[a + 'q_norm.weight'], [1, hd]), [h, hd]), tf.broadcastTo(tf.reshape(p[a + 'k_norm.weight'], [1, hd]), [kvh, hd])], 0) as tf.Tensor2D)
        : null,
      o: p[a + 'o_proj.weight'] as tf.Tensor2D,
      postNorm: p[pre + 'post_attention_layernorm.weight'] as tf.Tensor1D,
      gateUp: tf.concat([p[pre + 'mlp.gate_proj.weight'], p[pre + 'mlp.up_proj.weight']], 1) as tf.Tensor2D,
      down: p[pre + 'mlp.down_proj.weight'] as tf.Tensor2D,
    });
  }
  const embedTable = p['model.embed_tokens.weight'] as tf.Tensor2D;
  const head = cfg.tie_word_embeddings ? tf.transpose(embedTable) : (p['lm_head.weight'] as tf.Tensor2D);
  return { embed: embedTable, layers, norm: p['model.norm.weight'] as tf.Tensor1D, head };
}

// ---------------------------------------------------------------------------------------------------------------
// Attention with grouped-query heads (query head h reads kv head floor(h / rep), as HF's repeat_kv)

/** Causal additive mask [rep·T, T]: row r·T + i may see columns j ≤ i. -1e9 rather than -inf keeps softmax NaN-free. */
const maskCache = new Map<string, Float32Array>();
function causalMask(t: number, rep: number): Float32Array {
  const key = `${t}x${rep}`;
  let m = maskCache.get(key);
  if (!m) {
    m = new Float32Array(rep * t * t);
    for (let r = 0; r < rep; r++) for (let i = 0; i < t; i++) for (let j = i + 1; j < t; j++) m[(r * t + i) * t + j] = -1e9;
    if (maskCache.size >= 8) maskCache.clear(); // a long context's mask is megabytes: keep a few
    maskCache.set(key, m);
  }
  return m;
}

/** Per-layer keys and values after RoPE, for the sampler's cache: k, v [B, T, KVH, hd]. */
export interface LayerKv {
  k: tf.Tensor4D;
  v: tf.Tensor4D;
}

export function attention(cfg: DecoderConfig, w: LayerWeights, x: tf.Tensor2D, b: number, t: number, rope: { cos: tf.Tensor; sin: tf.Tensor }, kvOut: LayerKv[] | null): tf.Tensor2D {
  const h = cfg.num_attention_heads;
  const kvh = cfg.num_key_value_heads;
  const hd = cfg.head_dim;
  const rep = h / kvh;
  let qkv = linear(x, w.qkv); // [B·T, (H + 2·KVH)·hd]
  if (w.qkvBias) qkv = tf.add(qkv, w.qkvBias);
  const qkv4 = tf.reshape(qkv, [b, t, h + 2 * kvh, hd]); // [B, T, H + 2·KVH, hd]
  let qk = tf.slice(qkv4, [0, 0, 0, 0], [b, t, h + kvh, hd]) as tf.Tensor4D; // [B, T, H + KVH, hd]
  const v = tf.slice(qkv4, [0, 0, h + kvh, 0], [b, t, kvh, hd]) as tf.Tensor4D; // [B, T, KVH, hd]
  if (w.qkNorm) qk = rmsNorm(qk, w.qkNorm, cfg.rms_norm_eps); // Qwen3: per-head norm before RoPE
  qk = applyRope(qk, rope.cos, rope.sin); // [B, T, H + KVH, hd]
  const q = tf.mul(tf.slice(qk, [0, 0, 0, 0], [b, t, h, hd]), 1 / Math.sqrt(hd)); // [B, T, H, hd], pre-scaled
  const k = tf.slice(qk, [0, 0, h, 0], [b, t, kvh, hd]) as tf.Tensor4D; // [B, T, KVH, hd]
  if (kvOut) kvOut.push({ k: tf.keep(k), v: tf.keep(v) });

  // Group the query heads that share a kv head into one matrix: one batched matmul per kv head, no repeat_kv copy.
  const qg = tf.reshape(tf.transpose(tf.reshape(q, [b, t, kvh, rep, hd]), [0, 2, 3, 1, 4]), [b * kvh, rep * t, hd]); // [B·KVH, rep·T, hd]
  const kg = tf.reshape(tf.transpose(k, [0, 2, 1, 3]), [b * kvh, t, hd]); // [B·KVH, T, hd]
  const vg = tf.reshape(tf.transpose(v, [0, 2, 1, 3]), [b * kvh, t, hd]); // [B·KVH, T, hd]
  const scores = tf.add(tf.matMul(qg, kg, false, true), tf.tensor2d(causalMask(t, rep), [rep * t, t])); // [B·KVH, rep·T, T]
  const y = tf.matMul(tf.softmax(scores), vg); // [B·KVH, rep·T, hd]
  const merged = tf.reshape(tf.transpose(tf.reshape(y, [b, kvh, rep, t, hd]), [0, 3, 1, 2, 4]), [b * t, h * hd]) as tf.Tensor2D; // [B·T, H·hd]
  return linear(merged, w.o); // [B·T, D]
}

// ---------------------------------------------------------------------------------------------------------------
// SwiGLU MLP: down(silu(gate(x)) · up(x))

export function mlp(w: LayerWeights, x: tf.Tensor2D, ff: number): tf.Tensor2D {
  const gu = linear(x, w.gateUp); // [N, 2·I]
  const [g, u] = tf.split(gu, [ff, ff], 1); // [N, I] each
  return linear(tf.mul(tf.mul(g, tf.sigmoid(g)), u) as tf.Tensor2D, w.down); // [N, D]
}

// ---------------------------------------------------------------------------------------------------------------
// Block (pre-norm residual) and model

export function block(cfg: DecoderConfig, w: LayerWeights, x: tf.Tensor2D, b: number, t: number, rope: { cos: tf.Tensor; sin: tf.Tensor }, kvOut: LayerKv[] | null): tf.Tensor2D {
  x = tf.add(x, attention(cfg, w, rmsNorm(x, w.inputNorm, cfg.rms_norm_eps), b, t, rope, kvOut));
  return tf.add(x, mlp(w, rmsNorm(x, w.postNorm, cfg.rms_norm_eps), cfg.intermediate_size));
}

/**
 * Full causal forward over right-padded rows `ids` [B, T] (row-major). Returns logits [B·T, V]. Padding at the
 * end of a row never influences real tokens (they only look left). With `kvOut`, each layer's k and v are kept.
 */
export function forward(cfg: DecoderConfig, w: ModelWeights, ids: Int32Array, b: number, t: number, kvOut: LayerKv[] | null = null): tf.Tensor2D {
  if (ids.length !== b * t) throw new InvalidConfigError(`forward: ${ids.length} ids do not fill [${b}, ${t}]`);
  if (t > cfg.max_position_embeddings) throw new ContextLengthError(`sequence of ${t} tokens exceeds the context of ${cfg.max_position_embeddings}`);
  for (const id of ids) {
    if (id < 0 || id >= cfg.vocab_size || !Number.isInteger(id)) throw new InvalidConfigError(`token id ${id} is outside the vocabulary (0..${cfg.vocab_size - 1})`);
  }
  const positions = Array.from({ length: t }, (_, i) => i);
  const tables = ropeTables(cfg.head_dim, cfg.rope_theta, positions);
  const rope = { cos: tf.tensor2d(tables.cos, [t, cfg.head_dim]), sin: tf.tensor2d(tables.sin, [t, cfg.head_dim]) };
  let x = embed(w.embed, ids); // [B·T, D]
  for (const layer of w.layers) x = block(cfg, layer, x, b, t, rope, kvOut);
  x = rmsNorm(x, w.norm, cfg.rms_norm_eps);
  return linear(x, w.head); // [B·T, V]
}

/**
 * log p(target) per position from logits [N, V] and targets [N]: logit[target] − logsumexp(logits), at the given
 * temperature (logits / temperature). The one-hot product keeps it differentiable on wasm (no gather gradient).
 */
export function targetLogprobs(logits: tf.Tensor2D, targets: Int32Array, temperature = 1): tf.Tensor1D {
  const z = temperature === 1 ? logits : tf.div(logits, temperature);
  const picked = tf.sum(tf.mul(z, tf.oneHot(tf.tensor1d(targets, 'int32'), logits.shape[1])), -1); // [N]
  return tf.sub(picked, tf.logSumExp(z, -1)) as tf.Tensor1D; // [N]
}

/** Entropy of softmax(logits) per row [N] (a metric; no gradient needed). */
export function entropy(logits: tf.Tensor2D, temperature = 1): tf.Tensor1D {
  const z = temperature === 1 ? logits : tf.div(logits, temperature);
  const lse = tf.logSumExp(z, -1); // [N]
  return tf.sub(lse, tf.sum(tf.mul(tf.softmax(z), z), -1)) as tf.Tensor1D;
}

// ---------------------------------------------------------------------------------------------------------------
// Incremental decoding with a per-sequence KV cache.
//
// Why the attention of a decode step runs in plain JS: with continuous batching every sequence has its own length,
// and one new query row per sequence reads at most a few thousand cached rows — a few hundred kFLOP, cheaper in a
// JS loop than the dozens of small tensor ops (pad, mask, gather) a batched tensor version needs. The weight
// matmuls, which dominate, stay batched across sequences in tfjs.

/** Keys/values of one sequence: per layer, rows of [KVH·hd] for every position so far. */
export class KvCache {
  length = 0;
  private capacity: number;
  readonly k: Float32Array[];
  readonly v: Float32Array[];
  constructor(
    readonly layers: number,
    readonly rowSize: number,
    initialCapacity = 64,
  ) {
    this.capacity = initialCapacity;
    this.k = Array.from({ length: layers }, () => new Float32Array(initialCapacity * rowSize));
    this.v = Array.from({ length: layers }, () => new Float32Array(initialCapacity * rowSize));
  }
  /** Make room for `n` positions. */
  reserve(n: number): void {
    if (n <= this.capacity) return;
    let cap = this.capacity;
    while (cap < n) cap *= 2;
    for (let l = 0; l < this.layers; l++) {
      const k = new Float32Array(cap * this.rowSize);
      k.set(this.k[l]);
      this.k[l] = k;
      const v = new Float32Array(cap * this.rowSize);
      v.set(this.v[l]);
      this.v[l] = v;
    }
    this.capacity = cap;
  }
}

/** Run the prompt through the full forward, fill a fresh cache, return the last position's logits [V]. */
export function prefill(cfg: DecoderConfig, w: ModelWeights, promptIds: number[]): { cache: KvCache; logits: Float32Array } {
  const t = promptIds.length;
  if (t === 0) throw new InvalidConfigError('prompt must hold at least one token');
  if (t >= cfg.max_position_embeddings) throw new ContextLengthError(`prompt of ${t} tokens leaves no room in the context of ${cfg.max_position_embeddings}`);
  const rowSize = cfg.num_key_value_heads * cfg.head_dim;
  const cache = new KvCache(cfg.num_hidden_layers, rowSize, Math.max(64, t * 2));
  const kv: LayerKv[] = [];
  const last = tf.tidy(() => {
    const logits = forward(cfg, w, Int32Array.from(promptIds), 1, t, kv); // [T, V]
    return tf.slice(logits, [t - 1, 0], [1, cfg.vocab_size]); // [1, V]
  });
  for (let l = 0; l < kv.length; l++) {
    cache.k[l].set(kv[l].k.dataSync() as Float32Array); // [T, KVH·hd] rows
    cache.v[l].set(kv[l].v.dataSync() as Float32Array);
    kv[l].k.dispose();
    kv[l].v.dispose();
  }
  cache.length = t;
  const logits = last.dataSync() as Float32Array;
  last.dispose();
  return { cache, logits: new Float32Array(logits) };
}

/** Precomputed inverse frequencies for JS-side RoPE. */
function invFreqs(cfg: DecoderConfig): Float64Array {
  const half = cfg.head_dim / 2;
  const f = new Float64Array(half);
  for (let i = 0; i < half; i++) f[i] = Math.pow(cfg.rope_theta, (-2 * i) / cfg.head_dim);
  return f;
}

/** In place: RMS-normalise (optional) then rotate one head vector at `offset` for position `pos`. */
function normAndRotate(buf: Float32Array, offset: number, hd: number, pos: number, freqs: Float64Array, normW: Float32Array | null, eps: number): void {
  if (normW) {
    let ss = 0;
    for (let d = 0; d < hd; d++) ss += buf[offset + d] * buf[offset + d];
    const r = 1 / Math.sqrt(ss / hd + eps);
    for (let d = 0; d < hd; d++) buf[offset + d] = Math.fround(buf[offset + d] * r) * normW[d];
  }
  const half = hd / 2;
  for (let i = 0; i < half; i++) {
    const angle = pos * freqs[i];
    const c = Math.cos(angle);
    const s = Math.sin(angle);
    const x1 = buf[offset + i];
    const x2 = buf[offset + i + half];
    buf[offset + i] = x1 * c - x2 * s;
    buf[offset + i + half] = x2 * c + x1 * s;
  }
}

/** Host-side copies of the small per-layer tensors the JS attention needs. */
export interface DecodeHostWeights {
  qNorm: (Float32Array | null)[];
  kNorm: (Float32Array | null)[];
  freqs: Float64Array;
}

export function decodeHostWeights(cfg: DecoderConfig, p: Params): DecodeHostWeights {
  const qNorm: (Float32Array | null)[] = [];
  const kNorm: (Float32Array | null)[] = [];
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const a = layerPrefix(i) + 'self_attn.';
    qNorm.push(cfg.qk_norm ? (p[a + 'q_norm.weight'].dataSync() as Float32Array).slice() : null);
    kNorm.push(cfg.qk_norm ? (p[a + 'k_norm.weight'].dataSync() as Float32Array).slice() : null);
  }
  return { qNorm, kNorm, freqs: invFreqs(cfg) };
}

/**
 * One decode step for a batch of sequences: token `tokens[i]` is appended at position `caches[i].length`.
 * Returns logits [n, V] (row-major) and advances every cache by one.
 */
export function decodeStep(cfg: DecoderConfig, w: ModelWeights, host: DecodeHostWeights, caches: KvCache[], tokens: number[]): Float32Array {
  const n = tokens.length;
  const h = cfg.num_attention_heads;
  const kvh = cfg.num_key_value_heads;
  const hd = cfg.head_dim;
  const rep = h / kvh;
  const rowSize = kvh * hd;
  const qkvWidth = (h + 2 * kvh) * hd;
  const scale = 1 / Math.sqrt(hd);
  for (const c of caches) {
    if (c.length >= cfg.max_position_embeddings) throw new ContextLengthError(`sequence reached the context of ${cfg.max_position_embeddings}`);
    c.reserve(c.length + 1);
  }
  let x = tf.tidy(() => embed(w.embed, Int32Array.from(tokens))); // [n, D]
  const attnOut = new Float32Array(n * h * hd);
  let scores = new Float32Array(256);
  for (let l = 0; l < w.layers.length; l++) {
    const lw = w.layers[l];
    const qkvT = tf.tidy(() => {
      const qkv = linear(rmsNorm(x, lw.inputNorm, cfg.rms_norm_eps), lw.qkv); // [n, (H + 2·KVH)·hd]
      return lw.qkvBias ? tf.add(qkv, lw.qkvBias) : qkv;
    });
    const qkv = (qkvT.dataSync() as Float32Array).slice();
    qkvT.dispose();
    for (let i = 0; i < n; i++) {
      const cache = caches[i];
      const pos = cache.length;
      const base = i * qkvWidth;
      for (let hh = 0; hh < h + kvh; hh++) {
        const norm = hh < h ? host.qNorm[l] : host.kNorm[l];
        normAndRotate(qkv, base + hh * hd, hd, pos, host.freqs, norm, cfg.rms_norm_eps);
      }
      const kc = cache.k[l];
      const vc = cache.v[l];
      kc.set(qkv.subarray(base + h * hd, base + (h + kvh) * hd), pos * rowSize);
      vc.set(qkv.subarray(base + (h + kvh) * hd, base + qkvWidth), pos * rowSize);
      const len = pos + 1;
      if (scores.length < len) scores = new Float32Array(len * 2);
      for (let hh = 0; hh < h; hh++) {
        const g = Math.floor(hh / rep);
        const qo = base + hh * hd;
        let max = -Infinity;
        for (let t = 0; t < len; t++) {
          const ko = t * rowSize + g * hd;
          let s = 0;
          for (let d = 0; d < hd; d++) s += qkv[qo + d] * kc[ko + d];
          s *= scale;
          scores[t] = s;
          if (s > max) max = s;
        }
        let sum = 0;
        for (let t = 0; t < len; t++) {
          const e = Math.exp(scores[t] - max);
          scores[t] = e;
          sum += e;
        }
        const oo = (i * h + hh) * hd;
        for (let d = 0; d < hd; d++) attnOut[oo + d] = 0;
        for (let t = 0; t < len; t++) {
          const p = scores[t] / sum;
          const vo = t * rowSize + g * hd;
          for (let d = 0; d < hd; d++) attnOut[oo + d] += p * vc[vo + d];
        }
      }
    }
    const next = tf.tidy(() => {
      const y = tf.add(x, linear(tf.tensor2d(attnOut, [n, h * hd]), lw.o)) as tf.Tensor2D; // [n, D]
      return tf.add(y, mlp(lw, rmsNorm(y, lw.postNorm, cfg.rms_norm_eps), cfg.intermediate_size));
    }) as tf.Tensor2D;
    x.dispose();
    x = next;
  }
  for (const c of caches) c.length += 1;
  const logitsT = tf.tidy(() => linear(rmsNorm(x, w.norm, cfg.rms_norm_eps), w.head)); // [n, V]
  x.dispose();
  const logits = (logitsT.dataSync() as Float32Array).slice();
  logitsT.dispose();
  return logits;
}

/** HF-layout named tensors → tfjs tensors in internal layout (`trainable` makes tf.Variables). */
export function toParams(named: NamedTensors, trainable = false): Params {
  const out: Params = {};
  for (const [name, t] of Object.entries(named)) {
    const internal = toInternal(name, t);
    const tensor = tf.tensor(internal.data, internal.shape, 'float32');
    out[name] = trainable ? tf.variable(tensor, true) : tensor;
    if (trainable) tensor.dispose();
  }
  return out;
}

/** tfjs tensors in internal layout → HF-layout named tensors (copies). */
export function fromParams(p: Params): NamedTensors {
  const out: NamedTensors = {};
  for (const [name, t] of Object.entries(p)) {
    out[name] = toHuggingFace(name, { shape: t.shape.slice(), data: (t.dataSync() as Float32Array).slice() });
  }
  return out;
}
