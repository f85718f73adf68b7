/**
 * A Llama / Qwen2 / Qwen3-family decoder in TensorFlow.js, written to be read top to bottom.
 *
 * Blocks in dependency order: RMSNorm → RoPE → attention (grouped-query, optional q/k norm and qkv bias) →
 * SwiGLU MLP → block → model. One forward serves training (full causal sequence, per-token outputs) and the
 * sampler's prefill; `decodeStep` serves incremental decoding with a per-sequence KV cache. On webgpu, where our kernels
 * are registered, that forward takes them for RMSNorm, RoPE and SwiGLU (worker/webgpu/: one dispatch each, with their
 * gradients); every other backend runs the tf compositions written here.
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
import { decoderTensorShapes } from './checkpoint/decoder-tensors.ts';
import { readsSyncOnActiveBackend } from './backend.ts';
import { readAllFloats } from './read.ts';
import { causalAttention } from './causal-attention.ts';
import { behindTrunk, type TreeLayout } from './prefix-tree.ts';
import { HostKvCache } from './kv-cache.ts';
import type { DecoderConfig, NamedTensors } from './common/engine.ts';
import { seededRandom } from './common/random.ts';
import { ourKernelRuns } from './webgpu/gpu.ts';
import { PendingNorm } from './webgpu/fused-norm-matmul.ts';
import { gatedUnits } from './webgpu/fused-swiglu-matmul.ts';
import { matMulPlus } from './webgpu/matmul-add.ts';
import { f16MatmulsActive } from './webgpu/matmul.ts';
import { rmsNorm as fusedRmsNorm } from './webgpu/rms-norm.ts';
import { applyRope as ropeKernel, ROPE_KERNEL } from './webgpu/rope.ts';

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

// ---------------------------------------------------------------------------------------------------------------
// Primitive ops with gradients that suit the wasm backend

/** tf.customGrad's function type (not exported by @tensorflow/tfjs). */
type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/**
 * y = x @ w for x [N, in], w [in, out]; the gradient transposes explicitly (fast path on wasm), except in
 * mixed-precision products (webgpu/matmul.ts withF16Matmuls), where the products transpose as they read: dx = dy · wᵀ
 * then names w itself, so that it reads the weight's held f16 copy.
 */
export function linear(x: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor2D {
  const f = tf.customGrad(((xIn: tf.Tensor, wIn: tf.Tensor, save: tf.GradSaveFunc) => {
    save([xIn, wIn]);
    return {
      value: tf.matMul(xIn as tf.Tensor2D, wIn as tf.Tensor2D),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, ws] = saved as tf.Tensor2D[];
        if (f16MatmulsActive()) return [tf.matMul(dy as tf.Tensor2D, ws, false, true), tf.matMul(xs, dy as tf.Tensor2D, true, false)];
        return [tf.matMul(dy as tf.Tensor2D, tf.transpose(ws)), tf.matMul(tf.transpose(xs), dy as tf.Tensor2D)];
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(x, w) as tf.Tensor2D;
}

/**
 * The input of a projection: rows [N, D], or rows with a pre-norm still to apply (webgpu/fused-norm-matmul.ts), which
 * the product then applies in the same kernel where that was measured faster, else normalises once.
 */
export type ProjectionInput = tf.Tensor2D | PendingNorm;

/** x · w as `linear`, x normalised first when it is a PendingNorm (fused into the product on webgpu where it pays). */
export function project(x: ProjectionInput, w: tf.Tensor2D): tf.Tensor2D {
  return x instanceof PendingNorm ? x.project(w, linear) : linear(x, w);
}

/**
 * The logits of hidden states x [N, D]: x · head [D, V]. In mixed-precision products with tied embeddings the head
 * is the embedding table [V, D] read transposed by the product itself (x · Eᵀ, dx = dy · E, dE = dyᵀ · x), so that it
 * reads the table's held f16 copy instead of rounding a transpose made in every forward; the same terms either way.
 */
export function headLogits(cfg: DecoderConfig, w: ModelWeights, x: tf.Tensor2D): tf.Tensor2D {
  if (!cfg.tie_word_embeddings || !f16MatmulsActive()) return linear(x, w.head);
  const f = tf.customGrad(((xIn: tf.Tensor, eIn: tf.Tensor, save: tf.GradSaveFunc) => {
    save([xIn, eIn]);
    return {
      value: tf.matMul(xIn as tf.Tensor2D, eIn as tf.Tensor2D, false, true),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, es] = saved as tf.Tensor2D[];
        return [tf.matMul(dy as tf.Tensor2D, es), tf.matMul(dy as tf.Tensor2D, xs, true, false)];
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(x, w.embed) as tf.Tensor2D;
}

/**
 * Rows `ids` of `table` (an embedding lookup; the hidden states a tree's loss entries are predicted from) with a
 * gradient that does not need UnsortedSegmentSum (missing on wasm): the backward pass scatter-adds dy rows into a
 * dense [V, D] gradient in plain JS (N·D adds; a one-hot matmul would be N·V·D). Backends that cannot read
 * synchronously (WebGPU) have the kernel: there tfjs's own gather gradient runs.
 */
export function gatherRows(table: tf.Tensor2D, ids: Int32Array): tf.Tensor2D {
  if (!readsSyncOnActiveBackend()) return tf.gather(table, tf.tensor1d(ids, 'int32'));
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
export function rotateHalfMatrix(headDim: number): Float32Array {
  const half = headDim / 2;
  const r = new Float32Array(headDim * headDim);
  for (let i = 0; i < half; i++) {
    r[(i + half) * headDim + i] = -1; // out[i] = -x[i + half]
    r[i * headDim + i + half] = 1; // out[i + half] = x[i]
  }
  return r;
}

/** x @ R with R = rotateHalfMatrix; R is antisymmetric (Rᵀ = −R), so the gradient is dy @ (−R): no transpose, no weight gradient. */
function rotateHalf(x: tf.Tensor2D): tf.Tensor2D {
  const hd = x.shape[1];
  const f = tf.customGrad(((xIn: tf.Tensor) => ({
    value: tf.matMul(xIn as tf.Tensor2D, tf.tensor2d(rotateHalfMatrix(hd), [hd, hd])),
    gradFunc: (dy: tf.Tensor) => [tf.matMul(dy as tf.Tensor2D, tf.neg(tf.tensor2d(rotateHalfMatrix(hd), [hd, hd])))],
  })) as unknown as CustomGradientFunc);
  return f(x) as tf.Tensor2D;
}

/** x [B, T, nh, hd] rotated by position: x·cos + rotate_half(x)·sin, with cos/sin [T, hd]. */
export function applyRope(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
  const [b, t, nh, hd] = x.shape;
  const rot = rotateHalf(tf.reshape(x, [b * t * nh, hd]) as tf.Tensor2D); // [B·T·nh, hd]
  const cos4 = tf.reshape(cos, [1, t, 1, hd]);
  const sin4 = tf.reshape(sin, [1, t, 1, hd]);
  return tf.add(tf.mul(x, cos4), tf.mul(tf.reshape(rot, [b, t, nh, hd]), sin4)) as tf.Tensor4D;
}

/**
 * The forward's RoPE: our kernel on webgpu (one dispatch each way), the composition above elsewhere. (The forward's
 * RMSNorm and SwiGLU call webgpu/'s ops directly: their fallback is this file's composition, op for op; RoPE's
 * rotates by split and concat instead of R, so other backends keep applyRope here.)
 */
function rotate(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
  return ourKernelRuns(ROPE_KERNEL) ? ropeKernel(x, cos, sin) : applyRope(x, cos, sin);
}

// ---------------------------------------------------------------------------------------------------------------
// Per-layer weights by role. Training and the full forward use them one by one: wasm's slice copies its whole input,
// so splitting the output of a fused matmul costs more than the matmul saves. Decoding (a few rows) fuses q/k/v and
// gate/up instead (see DecodeHostWeights).

export interface LayerWeights {
  inputNorm: tf.Tensor1D;
  q: tf.Tensor2D; // [D, H·hd]
  k: tf.Tensor2D; // [D, KVH·hd]
  v: tf.Tensor2D; // [D, KVH·hd]
  qBias: tf.Tensor1D | null; // [H·hd]
  kBias: tf.Tensor1D | null; // [KVH·hd]
  vBias: tf.Tensor1D | null; // [KVH·hd]
  qNorm: tf.Tensor1D | null; // [hd] (Qwen3)
  kNorm: tf.Tensor1D | null; // [hd]
  o: tf.Tensor2D; // [H·hd, D]
  postNorm: tf.Tensor1D;
  gate: tf.Tensor2D; // [D, I]
  up: tf.Tensor2D; // [D, I]
  down: tf.Tensor2D; // [I, D]
}

export interface ModelWeights {
  embed: tf.Tensor2D; // [V, D]
  layers: LayerWeights[];
  norm: tf.Tensor1D;
  head: tf.Tensor2D; // [D, V]
}

/** The model's view of `p` (differentiable; only a tied head is a new tensor, the embedding's transpose). */
export function fuseWeights(cfg: DecoderConfig, p: Params): ModelWeights {
  const layers: LayerWeights[] = [];
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const pre = layerPrefix(i);
    const a = pre + 'self_attn.';
    const bias = (n: string) => (cfg.attention_bias ? (p[a + n + '_proj.bias'] as tf.Tensor1D) : null);
    layers.push({
      inputNorm: p[pre + 'input_layernorm.weight'] as tf.Tensor1D,
      q: p[a + 'q_proj.weight'] as tf.Tensor2D,
      k: p[a + 'k_proj.weight'] as tf.Tensor2D,
      v: p[a + 'v_proj.weight'] as tf.Tensor2D,
      qBias: bias('q'),
      kBias: bias('k'),
      vBias: bias('v'),
      qNorm: cfg.qk_norm ? (p[a + 'q_norm.weight'] as tf.Tensor1D) : null,
      kNorm: cfg.qk_norm ? (p[a + 'k_norm.weight'] as tf.Tensor1D) : null,
      o: p[a + 'o_proj.weight'] as tf.Tensor2D,
      postNorm: p[pre + 'post_attention_layernorm.weight'] as tf.Tensor1D,
      gate: p[pre + 'mlp.gate_proj.weight'] as tf.Tensor2D,
      up: p[pre + 'mlp.up_proj.weight'] as tf.Tensor2D,
      down: p[pre + 'mlp.down_proj.weight'] as tf.Tensor2D,
    });
  }
  const embedTable = p['model.embed_tokens.weight'] as tf.Tensor2D;
  const head = cfg.tie_word_embeddings ? tf.transpose(embedTable) : (p['lm_head.weight'] as tf.Tensor2D);
  return { embed: embedTable, layers, norm: p['model.norm.weight'] as tf.Tensor1D, head };
}

// ---------------------------------------------------------------------------------------------------------------
// Attention with grouped-query heads (query head h reads kv head floor(h / rep), as HF's repeat_kv)

/** Per-layer keys and values after RoPE, for the sampler's cache: k, v [B, T, KVH, hd]. */
export interface LayerKv {
  k: tf.Tensor4D;
  v: tf.Tensor4D;
}

/** One layer's post-RoPE keys and values of one sequence in attention-group layout: k, v [KVH, L, hd]. */
export interface GroupedKv {
  k: tf.Tensor3D;
  v: tf.Tensor3D;
}

/**
 * A tree forward's link to a trunk (worker/trunk.ts): `before` holds, per layer, the keys and values of a trunk that
 * every node sees in front of its own ancestors (the tree's depths continue after it); `keep` receives each layer's
 * own keys and values (the trunk's own pass).
 */
export interface TrunkKeys {
  before?: GroupedKv[] | null;
  keep?: GroupedKv[] | null;
}

/** One layer's part of TrunkKeys. */
interface LayerTrunk {
  before: GroupedKv | null;
  keep: GroupedKv[] | null;
}

/**
 * Attention of one layer. `tree` is the layout over every key position: with a trunk in `trunk.before` that is the
 * trunk's chain followed by this pass's nodes (prefix-tree.ts behindTrunk), and the queries are this pass's nodes only.
 */
/** x [B·T, D] projected to `heads` heads: [B, T, heads, hd]. */
function projectHeads(x: ProjectionInput, weight: tf.Tensor2D, bias: tf.Tensor1D | null, b: number, t: number, heads: number, hd: number): tf.Tensor4D {
  return tf.reshape(bias ? tf.add(project(x, weight), bias) : project(x, weight), [b, t, heads, hd]) as tf.Tensor4D;
}

/** One layer's keys (after the k norm and RoPE) and values from its normalised input x [B·T, D]: [B, T, KVH, hd] each. */
function keysAndValues(cfg: DecoderConfig, w: LayerWeights, x: ProjectionInput, b: number, t: number, rope: { cos: tf.Tensor; sin: tf.Tensor }): LayerKv {
  const kvh = cfg.num_key_value_heads;
  let k = projectHeads(x, w.k, w.kBias, b, t, kvh, cfg.head_dim);
  if (w.kNorm) k = fusedRmsNorm(k, w.kNorm, cfg.rms_norm_eps);
  return { k: rotate(k, rope.cos, rope.sin), v: projectHeads(x, w.v, w.vBias, b, t, kvh, cfg.head_dim) };
}

/** Keys or values [B, T, KVH, hd] → attention groups [B·KVH, T, hd]. */
function groupHeads(x: tf.Tensor4D): tf.Tensor3D {
  const [b, t, kvh, hd] = x.shape;
  return tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [b * kvh, t, hd]) as tf.Tensor3D;
}

export function attention(cfg: DecoderConfig, w: LayerWeights, x: ProjectionInput, b: number, t: number, rope: { cos: tf.Tensor; sin: tf.Tensor }, kvOut: LayerKv[] | null, tree: TreeLayout | null = null, trunk: LayerTrunk | null = null): tf.Tensor2D {
  const h = cfg.num_attention_heads;
  const kvh = cfg.num_key_value_heads;
  const hd = cfg.head_dim;
  const rep = h / kvh;
  let q = projectHeads(x, w.q, w.qBias, b, t, h, hd); // [B, T, H, hd]
  if (w.qNorm) q = fusedRmsNorm(q, w.qNorm, cfg.rms_norm_eps); // Qwen3: per-head norm before RoPE
  q = tf.mul(rotate(q, rope.cos, rope.sin), 1 / Math.sqrt(hd)) as tf.Tensor4D; // pre-scaled
  const { k, v } = keysAndValues(cfg, w, x, b, t, rope); // [B, T, KVH, hd]
  if (kvOut) kvOut.push({ k: tf.keep(k), v: tf.keep(v) });

  // Group the query heads that share a kv head (HF's repeat_kv without the copy): group = (row, kv head), its query
  // rows position-major. causalAttention runs each group as plain 2-D matmuls, in query blocks on long sequences.
  const qg = tf.reshape(tf.transpose(tf.reshape(q, [b, t, kvh, rep, hd]), [0, 2, 1, 3, 4]), [b * kvh, t * rep, hd]) as tf.Tensor3D; // [B·KVH, T·rep, hd]
  const kg = groupHeads(k); // [B·KVH, T, hd]
  const vg = groupHeads(v); // [B·KVH, T, hd]
  trunk?.keep?.push({ k: kg, v: vg });
  const before = trunk?.before ?? null;
  if (before && b !== 1) throw new InvalidConfigError(`a trunk's keys serve one packed sequence, not ${b} rows`);
  // Behind a trunk the keys are the trunk's then this pass's (a concat: its gradient hands the trunk its dK, dV).
  const keys = before ? (tf.concat([before.k, kg], 1) as tf.Tensor3D) : kg; // [B·KVH, L + T, hd]
  const values = before ? (tf.concat([before.v, vg], 1) as tf.Tensor3D) : vg;
  const y = causalAttention(qg, keys, values, undefined, tree, before ? before.k.shape[1] : 0); // [B·KVH, T·rep, hd]
  const merged = tf.reshape(tf.transpose(tf.reshape(y, [b, kvh, t, rep, hd]), [0, 2, 1, 3, 4]), [b * t, h * hd]) as tf.Tensor2D; // [B·T, H·hd]
  return linear(merged, w.o); // [B·T, D]
}

// ---------------------------------------------------------------------------------------------------------------
// SwiGLU MLP: down(silu(gate(x)) · up(x))

export function mlp(w: LayerWeights, x: ProjectionInput): tf.Tensor2D {
  // Norm, gate/up and silu(g)·up in one kernel on webgpu where it pays (webgpu/fused-swiglu-matmul.ts).
  return linear(gatedUnits(x, { gate: w.gate, up: w.up }, linear), w.down); // [N, I] → [N, D]
}

// ---------------------------------------------------------------------------------------------------------------
// Block (pre-norm residual) and model

export function block(cfg: DecoderConfig, w: LayerWeights, x: tf.Tensor2D, b: number, t: number, rope: { cos: tf.Tensor; sin: tf.Tensor }, kvOut: LayerKv[] | null, tree: TreeLayout | null = null, trunk: LayerTrunk | null = null): tf.Tensor2D {
  // Pre-norms left pending: fused into the products that read them where that pays, else applied once.
  x = tf.add(x, attention(cfg, w, new PendingNorm(x, w.inputNorm, cfg.rms_norm_eps), b, t, rope, kvOut, tree, trunk));
  return tf.add(x, mlp(w, new PendingNorm(x, w.postNorm, cfg.rms_norm_eps)));
}

/**
 * Full causal forward over right-padded rows `ids` [B, T] (row-major). Returns logits [B·T, V]. Padding at the
 * end of a row never influences real tokens (they only look left). With `kvOut`, each layer's k and v are kept.
 */
export function forward(cfg: DecoderConfig, w: ModelWeights, ids: Int32Array, b: number, t: number, kvOut: LayerKv[] | null = null): tf.Tensor2D {
  if (ids.length !== b * t) throw new InvalidConfigError(`forward: ${ids.length} ids do not fill [${b}, ${t}]`);
  if (t > cfg.max_position_embeddings) throw new ContextLengthError(`sequence of ${t} tokens exceeds the context of ${cfg.max_position_embeddings}`);
  const positions = Array.from({ length: t }, (_, i) => i);
  return headLogits(cfg, w, hiddenStates(cfg, w, ids, b, t, positions, kvOut, null)); // [B·T, V]
}

/**
 * Forward over a packed prefix tree (worker/prefix-tree.ts), one sequence in depth-first order in which each token
 * sees its ancestors and sits at its depth: the logits at `outputNodes` only [E, V] (the nodes a loss is computed
 * at; the rest never reach the output projection). A tree of one chain is `forward` of that one row. With
 * `trunk.before`, every node also sees the trunk's keys, ahead of its own ancestors, and the tree's roots sit right
 * after the trunk (depth = trunk length); `trunk.keep` collects this pass's keys and values per layer.
 */
export function treeForward(cfg: DecoderConfig, w: ModelWeights, ids: Int32Array, tree: TreeLayout, outputNodes: Int32Array, trunk: TrunkKeys = {}): tf.Tensor2D {
  const t = ids.length;
  if (tree.parent.length !== t || tree.depth.length !== t) throw new InvalidConfigError(`treeForward: a layout of ${tree.parent.length} nodes for ${t} ids`);
  const before = trunk.before ?? null;
  if (before && before.length !== w.layers.length) throw new InvalidConfigError(`treeForward: trunk keys for ${before.length} of ${w.layers.length} layers`);
  const trunkLength = before ? before[0].k.shape[1] : 0;
  let deepest = 0;
  for (let i = 0; i < t; i++) {
    deepest = Math.max(deepest, tree.depth[i]);
    if (tree.parent[i] < 0 && tree.depth[i] !== trunkLength) throw new InvalidConfigError(`treeForward: a root at depth ${tree.depth[i]} behind a trunk of ${trunkLength} tokens`);
  }
  if (deepest >= cfg.max_position_embeddings) throw new ContextLengthError(`a branch of ${deepest + 1} tokens exceeds the context of ${cfg.max_position_embeddings}`);
  // One chain (a micro-batch of one sample, or samples that only extend each other) is plain causal attention,
  // behind a trunk too (the trunk and the chain are one longer chain).
  const chain = tree.chainStart.every((start) => start === 0);
  const layout = chain ? null : trunkLength > 0 ? layoutBehindTrunk(tree, trunkLength) : tree;
  // No output node (a trunk of prompt tokens): only the keys and values are wanted, the last layer's included.
  const keysOnly = outputNodes.length === 0;
  const hidden = hiddenStates(cfg, w, ids, 1, t, Array.from(tree.depth), null, layout, trunk, keysOnly); // [N, D]
  if (keysOnly) return tf.zeros([0, w.head.shape[1]]);
  return headLogits(cfg, w, gatherRows(hidden, outputNodes)); // [E, V]
}

/** Layouts behind a trunk, built once per tree: every layer and every pass over it (policy, reference) reuses one, and with it its planned blocks. */
const trunkLayouts = new WeakMap<TreeLayout, Map<number, TreeLayout>>();
function layoutBehindTrunk(tree: TreeLayout, trunkLength: number): TreeLayout {
  let byLength = trunkLayouts.get(tree);
  if (!byLength) trunkLayouts.set(tree, (byLength = new Map()));
  let layout = byLength.get(trunkLength);
  if (!layout) byLength.set(trunkLength, (layout = behindTrunk(tree, trunkLength)));
  return layout;
}

/**
 * The decoder stack: embeddings, blocks at RoPE `positions` [T], final norm → [B·T, D]. `keysOnly` stops at the last
 * layer's keys and values (into `trunk.keep`): its attention output, MLP and the final norm would reach no output,
 * and the last layer's input comes back instead.
 */
function hiddenStates(cfg: DecoderConfig, w: ModelWeights, ids: Int32Array, b: number, t: number, positions: number[], kvOut: LayerKv[] | null, tree: TreeLayout | null, trunk: TrunkKeys = {}, keysOnly = false): tf.Tensor2D {
  for (const id of ids) {
    if (id < 0 || id >= cfg.vocab_size || !Number.isInteger(id)) throw new InvalidConfigError(`token id ${id} is outside the vocabulary (0..${cfg.vocab_size - 1})`);
  }
  const tables = ropeTables(cfg.head_dim, cfg.rope_theta, positions);
  const rope = { cos: tf.tensor2d(tables.cos, [t, cfg.head_dim]), sin: tf.tensor2d(tables.sin, [t, cfg.head_dim]) };
  let x = gatherRows(w.embed, ids); // [B·T, D]
  for (const [l, layer] of w.layers.entries()) {
    if (keysOnly && l === w.layers.length - 1) {
      const { k, v } = keysAndValues(cfg, layer, new PendingNorm(x, layer.inputNorm, cfg.rms_norm_eps), b, t, rope);
      trunk.keep?.push({ k: groupHeads(k), v: groupHeads(v) });
      return x;
    }
    x = block(cfg, layer, x, b, t, rope, kvOut, tree, { before: trunk.before?.[l] ?? null, keep: trunk.keep ?? null });
  }
  return fusedRmsNorm(x, w.norm, cfg.rms_norm_eps);
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
// With continuous batching every sequence has its own length, so the attention of a decode step runs per sequence,
// one query row over that sequence's cache, in a WebAssembly SIMD kernel that reads the cache where it lies
// (kv-cache.ts). The weight matmuls, which dominate, stay batched across sequences in tfjs.

/** A fresh host cache shaped for `cfg`. */
function newHostCache(cfg: DecoderConfig): HostKvCache {
  return new HostKvCache({ layers: cfg.num_hidden_layers, heads: cfg.num_attention_heads, kvHeads: cfg.num_key_value_heads, headDim: cfg.head_dim });
}

/** Run the prompt through the full forward, fill a fresh cache, return the last position's logits [V]. */
export function prefill(cfg: DecoderConfig, w: ModelWeights, promptIds: number[]): { cache: HostKvCache; logits: Float32Array } {
  return prefillBatch(cfg, w, [promptIds])[0];
}

/**
 * The prompts as one right-padded [B, T] id matrix, each checked: not empty, and leaving room in the context for at
 * least one generated token.
 */
export function paddedPrompts(cfg: DecoderConfig, prompts: number[][]): { ids: Int32Array; b: number; t: number } {
  const b = prompts.length;
  const t = Math.max(...prompts.map((p) => p.length));
  for (const p of prompts) {
    if (p.length === 0) throw new InvalidConfigError('prompt must hold at least one token');
    if (p.length >= cfg.max_position_embeddings) throw new ContextLengthError(`prompt of ${p.length} tokens leaves no room in the context of ${cfg.max_position_embeddings}`);
  }
  const ids = new Int32Array(b * t);
  prompts.forEach((p, row) => ids.set(p, row * t));
  return { ids, b, t };
}

/**
 * Prefill several prompts in one forward over right-padded rows (padding sits after each prompt, and positions only
 * look left, so it changes nothing): per prompt a fresh cache and the logits [V] of its last position.
 */
export function prefillBatch(cfg: DecoderConfig, w: ModelWeights, prompts: number[][]): { cache: HostKvCache; logits: Float32Array }[] {
  const { ids, b, t } = paddedPrompts(cfg, prompts);
  const rowSize = cfg.num_key_value_heads * cfg.head_dim;
  const kv: LayerKv[] = [];
  const lastT = tf.tidy(() => {
    const logits = forward(cfg, w, ids, b, t, kv); // [B·T, V]
    const lastRows = Int32Array.from(prompts, (p, row) => row * t + p.length - 1);
    return tf.gather(logits, tf.tensor1d(lastRows, 'int32')); // [B, V]
  });
  const caches = prompts.map((p) => {
    const cache = newHostCache(cfg);
    cache.reserve(p.length);
    return cache;
  });
  for (let l = 0; l < kv.length; l++) {
    const k = kv[l].k.dataSync() as Float32Array; // [B, T, KVH·hd] rows
    const v = kv[l].v.dataSync() as Float32Array;
    prompts.forEach((p, row) => caches[row].write(l, 0, p.length, k, v, row * t * rowSize));
    kv[l].k.dispose();
    kv[l].v.dispose();
  }
  const last = lastT.dataSync() as Float32Array;
  lastT.dispose();
  const vocab = cfg.vocab_size;
  return prompts.map((p, row) => {
    caches[row].length = p.length;
    caches[row].tokens = p.slice();
    return { cache: caches[row], logits: last.slice(row * vocab, (row + 1) * vocab) };
  });
}

/** Precomputed inverse frequencies for JS-side RoPE. */
function invFreqs(cfg: DecoderConfig): Float64Array {
  const half = cfg.head_dim / 2;
  const f = new Float64Array(half);
  for (let i = 0; i < half; i++) f[i] = Math.pow(cfg.rope_theta, (-2 * i) / cfg.head_dim);
  return f;
}

/** cos/sin of every RoPE frequency at position `pos` (shared by all heads and layers of a decode step). */
function ropeAngles(pos: number, freqs: Float64Array, cos: Float64Array, sin: Float64Array): void {
  for (let i = 0; i < freqs.length; i++) {
    const angle = pos * freqs[i];
    cos[i] = Math.cos(angle);
    sin[i] = Math.sin(angle);
  }
}

/** In place: RMS-normalise (optional) then rotate one head vector at `offset` by the angles of its position. */
function normAndRotate(buf: Float32Array, offset: number, hd: number, cos: Float64Array, sin: Float64Array, normW: Float32Array | null, eps: number): void {
  if (normW) {
    let ss = 0;
    for (let d = 0; d < hd; d++) ss += buf[offset + d] * buf[offset + d];
    const r = 1 / Math.sqrt(ss / hd + eps);
    for (let d = 0; d < hd; d++) buf[offset + d] = Math.fround(buf[offset + d] * r) * normW[d];
  }
  const half = hd / 2;
  for (let i = 0; i < half; i++) {
    const x1 = buf[offset + i];
    const x2 = buf[offset + i + half];
    buf[offset + i] = x1 * cos[i] - x2 * sin[i];
    buf[offset + i + half] = x2 * cos[i] + x1 * sin[i];
  }
}

/** Per-layer matmul weights fused for decoding: a few rows per step, so one matmul (and one download) beats three. */
export interface DecodeLayer {
  qkv: tf.Tensor2D; // [D, (H + 2·KVH)·hd]
  qkvBias: tf.Tensor1D | null; // [(H + 2·KVH)·hd]
  gateUp: tf.Tensor2D; // [D, 2·I]
}

/** What decodeStep needs besides ModelWeights: fused matmul weights, and host copies of the small tensors its JS attention reads. */
export interface DecodeHostWeights {
  layers: DecodeLayer[];
  qNorm: (Float32Array | null)[];
  kNorm: (Float32Array | null)[];
  freqs: Float64Array;
}

/** Per layer, q/k/v and gate/up weights concatenated for decoding (new tensors: release with disposeDecodeLayers). */
export function fusedDecodeLayers(cfg: DecoderConfig, p: Params): DecodeLayer[] {
  return Array.from({ length: cfg.num_hidden_layers }, (_, i) => {
    const pre = layerPrefix(i);
    const a = pre + 'self_attn.';
    return {
      qkv: tf.concat([p[a + 'q_proj.weight'], p[a + 'k_proj.weight'], p[a + 'v_proj.weight']], 1) as tf.Tensor2D,
      qkvBias: cfg.attention_bias ? (tf.concat([p[a + 'q_proj.bias'], p[a + 'k_proj.bias'], p[a + 'v_proj.bias']], 0) as tf.Tensor1D) : null,
      gateUp: tf.concat([p[pre + 'mlp.gate_proj.weight'], p[pre + 'mlp.up_proj.weight']], 1) as tf.Tensor2D,
    };
  });
}

export function disposeDecodeLayers(layers: DecodeLayer[]): void {
  for (const l of layers) tf.dispose([l.qkv, l.gateUp, ...(l.qkvBias ? [l.qkvBias] : [])]);
}

/** Build the decode weights from `p` (new tensors: release them with disposeDecodeHostWeights). */
export function decodeHostWeights(cfg: DecoderConfig, p: Params): DecodeHostWeights {
  const host = (name: string) => (p[name].dataSync() as Float32Array).slice();
  const attn = (i: number) => layerPrefix(i) + 'self_attn.';
  const layerIds = Array.from({ length: cfg.num_hidden_layers }, (_, i) => i);
  return {
    layers: fusedDecodeLayers(cfg, p),
    qNorm: layerIds.map((i) => (cfg.qk_norm ? host(attn(i) + 'q_norm.weight') : null)),
    kNorm: layerIds.map((i) => (cfg.qk_norm ? host(attn(i) + 'k_norm.weight') : null)),
    freqs: invFreqs(cfg),
  };
}

export function disposeDecodeHostWeights(host: DecodeHostWeights): void {
  disposeDecodeLayers(host.layers);
}

/**
 * One decode step for a batch of sequences: token `tokens[i]` is appended at position `caches[i].length`.
 * Returns logits [n, V] (row-major) and advances every cache by one.
 */
export function decodeStep(cfg: DecoderConfig, w: ModelWeights, host: DecodeHostWeights, caches: HostKvCache[], tokens: number[]): Float32Array {
  return extendStep(cfg, w, host, caches, tokens.map((t) => [t]));
}

/**
 * Append `tokenLists[i]` to `caches[i]` for every sequence in one pass: the weight matmuls run over all new rows
 * together, and each row attends (in order, so causally) over its own cache. Returns the logits [n, V] of each
 * sequence's last new row. A decode step appends one token per sequence; a prompt that continues a cached prefix
 * appends the rest of the prompt. RMSNorm and SwiGLU are the forward's ops (our kernels on webgpu, the same tf
 * compositions elsewhere); q/k norm and RoPE run on the host, over the rows read back for the host attention.
 * Reading back needs dataSync, so the engine runs this on wasm/cpu only (webgpu decodes in tensor-decode.ts).
 */
export function extendStep(cfg: DecoderConfig, w: ModelWeights, host: DecodeHostWeights, caches: HostKvCache[], tokenLists: number[][]): Float32Array {
  const n = caches.length;
  const h = cfg.num_attention_heads;
  const kvh = cfg.num_key_value_heads;
  const hd = cfg.head_dim;
  const qkvWidth = (h + 2 * kvh) * hd;
  const half = hd / 2;
  const rows = tokenLists.reduce((total, list) => total + list.length, 0);
  const firstRow: number[] = [];
  const cos = new Float64Array(rows * half);
  const sin = new Float64Array(rows * half);
  let row = 0;
  caches.forEach((c, i) => {
    const list = tokenLists[i];
    if (list.length === 0) throw new InvalidConfigError('every sequence must append at least one token');
    if (c.length + list.length > cfg.max_position_embeddings) throw new ContextLengthError(`sequence reached the context of ${cfg.max_position_embeddings}`);
    c.reserve(c.length + list.length);
    firstRow.push(row);
    for (let j = 0; j < list.length; j++, row++) ropeAngles(c.length + j, host.freqs, cos.subarray(row * half, (row + 1) * half), sin.subarray(row * half, (row + 1) * half));
  });
  let x = tf.tidy(() => gatherRows(w.embed, Int32Array.from(tokenLists.flat()))); // [rows, D]
  const attnOut = new Float32Array(rows * h * hd);
  for (let l = 0; l < w.layers.length; l++) {
    const lw = w.layers[l];
    const dw = host.layers[l];
    const qkvT = tf.tidy(() => new PendingNorm(x, lw.inputNorm, cfg.rms_norm_eps).project(dw.qkv, linear, dw.qkvBias)); // [rows, (H + 2·KVH)·hd]
    const qkv = (qkvT.dataSync() as Float32Array).slice();
    qkvT.dispose();
    for (let i = 0; i < n; i++) {
      const cache = caches[i];
      for (let j = 0; j < tokenLists[i].length; j++) {
        const r = firstRow[i] + j;
        const pos = cache.length + j;
        const base = r * qkvWidth;
        const c = cos.subarray(r * half, (r + 1) * half);
        const s = sin.subarray(r * half, (r + 1) * half);
        for (let hh = 0; hh < h + kvh; hh++) normAndRotate(qkv, base + hh * hd, hd, c, s, hh < h ? host.qNorm[l] : host.kNorm[l], cfg.rms_norm_eps);
        cache.write(l, pos, 1, qkv.subarray(base + h * hd, base + (h + kvh) * hd), qkv.subarray(base + (h + kvh) * hd, base + qkvWidth));
        cache.attend(l, pos + 1, qkv, base, attnOut, r * h * hd);
      }
    }
    const next = tf.tidy(() => {
      // The residual adds in the products' stores on webgpu (matmul-add.ts), as tensor-decode.ts's decode step.
      const y = matMulPlus(tf.tensor2d(attnOut, [rows, h * hd]), lw.o, x); // [rows, D]
      const normed = new PendingNorm(y, lw.postNorm, cfg.rms_norm_eps);
      return matMulPlus(gatedUnits(normed, { gateUp: dw.gateUp }, linear), lw.down, y); // via [rows, I]
    }) as tf.Tensor2D;
    x.dispose();
    x = next;
  }
  caches.forEach((c, i) => {
    c.length += tokenLists[i].length;
    c.tokens.push(...tokenLists[i]);
  });
  const logitsT = tf.tidy(() => {
    const lastRows = rows === n ? x : tf.gather(x, tf.tensor1d(Int32Array.from(firstRow, (r, i) => r + tokenLists[i].length - 1), 'int32'));
    return linear(fusedRmsNorm(lastRows as tf.Tensor2D, w.norm, cfg.rms_norm_eps), w.head); // [n, V]
  });
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
export async function fromParams(p: Params): Promise<NamedTensors> {
  const entries = Object.entries(p);
  const values = await readAllFloats(entries.map(([, t]) => t));
  const out: NamedTensors = {};
  entries.forEach(([name, t], i) => {
    out[name] = toHuggingFace(name, { shape: t.shape.slice(), data: values[i] });
  });
  return out;
}
