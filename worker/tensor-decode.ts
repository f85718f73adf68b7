/**
 * Incremental decoding for backends that cannot read synchronously (WebGPU under Node): the KV cache stays on the
 * device as tensors and the attention of a decode step is tf ops, so a step reads back one thing with `await data()`:
 * its logits [n, V], or, handed picks (the *Sampled functions, and prefills given picks), each row's token and
 * logprob sampled on the device (webgpu/sample.ts). A decode step's kernels are recorded into one command buffer
 * (webgpu/gpu.ts recordedTogether), submitted by that read. model.ts's `decodeStep` (host-side attention over host
 * caches) stays the wasm/cpu path.
 *
 * A GPU decode step of a small model costs what its ops cost to dispatch, not what they compute, so the step is
 * written in as few ops as it can: q/k/v and gate/up are one matmul each, q and k are normalised (one RMSNorm with a
 * per-head weight that also carries the attention scale) and rotated together (one RoPE kernel on webgpu, else
 * x·cos + (x·R)·sin, R = rotate-half), the other norms and SwiGLU are one kernel each on webgpu (webgpu/rms-norm.ts,
 * swiglu.ts; model.ts's composition elsewhere), or folded into the qkv and gate/up products where that was measured
 * faster (webgpu/fused-norm-matmul.ts, fused-swiglu-matmul.ts), and the layers' attention is one of two:
 * - on webgpu with our kernels, the paged KV cache (webgpu/paged-kv-cache.ts): one pool shared by every sequence,
 *   written in place, and one dispatch per layer that appends the batch's new keys and values and attends every
 *   sequence of the batch (webgpu/paged-attention.ts); a prompt that continues a kept sequence shares its pages and
 *   runs only the rest (extendPaged);
 * - elsewhere (wasm and cpu run this path in tests), each sequence keeps, per layer, its keys and values after RoPE
 *   as [KVH, len, hd] tensors that a step extends by one position (a copy: tfjs has no in-place update) and attends
 *   over with tf ops, about ten tfjs kernels per sequence per layer (tf.profile).
 */
import * as tf from '@tensorflow/tfjs';
import type { DecoderConfig, GeneratedToken } from './common/engine.ts';
import { ContextLengthError, type DecodeLayer, disposeDecodeLayers, forward, fusedDecodeLayers, type GroupedKv, layerPrefix, type LayerKv, linear, type ModelWeights, paddedPrompts, type Params, rmsNorm, ropeTables, rotateHalfMatrix, treeForward } from './model.ts';
import { ourKernelRuns, recordedTogether } from './webgpu/gpu.ts';
import { pagedAttention, pagedDecodeRuns } from './webgpu/paged-attention.ts';
import { PAGE_SLOTS, pagedAppend, type PagedKvPool, type PagedKvSequence, PagedKvShapeError } from './webgpu/paged-kv-cache.ts';
import { PendingNorm } from './webgpu/fused-norm-matmul.ts';
import { matMulPlus } from './webgpu/matmul-add.ts';
import { gatedUnits } from './webgpu/fused-swiglu-matmul.ts';
import { rmsNorm as fusedRmsNorm, RMS_NORM_KERNEL } from './webgpu/rms-norm.ts';
import { ROPE_KERNEL, ropeHeads } from './webgpu/rope.ts';
import { type DeviceSampling, readSamples, sampleOnDevice } from './webgpu/sample.ts';
import type { SampledStep } from './sampler.ts';

/** Keys/values of one sequence on the device: per layer [KVH, length, hd]. Release with `dispose`. */
export class TensorKvCache {
  constructor(
    public length: number,
    readonly k: tf.Tensor3D[],
    readonly v: tf.Tensor3D[],
  ) {}
  dispose(): void {
    tf.dispose([...this.k, ...this.v]);
    this.k.length = 0;
    this.v.length = 0;
  }
}

/** What decodeOnDevice needs besides ModelWeights (new tensors: release with disposeDeviceDecodeWeights). */
export interface DeviceDecodeWeights {
  layers: DecodeLayer[];
  /** Per layer, [H + KVH, hd]: q_norm (times 1/√hd) for the query heads, k_norm for the key heads; null without q/k norm. */
  qkNorm: (tf.Tensor2D | null)[];
  /** [H + KVH, 1]: 1/√hd for query heads, 1 for key heads (models without q/k norm scale with this instead). */
  qkScale: tf.Tensor2D;
  /** rotate-half as a matrix [hd, hd]. */
  rotate: tf.Tensor2D;
  /** [hd] of ones: the RMSNorm kernel's weight where the per-head weight (qkNorm) is applied after it. */
  unit: tf.Tensor1D;
}

export function deviceDecodeWeights(cfg: DecoderConfig, p: Params): DeviceDecodeWeights {
  const { num_attention_heads: h, num_key_value_heads: kvh, head_dim: hd } = cfg;
  const scale = 1 / Math.sqrt(hd);
  return {
    layers: fusedDecodeLayers(cfg, p),
    qkNorm: Array.from({ length: cfg.num_hidden_layers }, (_, i) => {
      if (!cfg.qk_norm) return null;
      const a = layerPrefix(i) + 'self_attn.';
      return tf.tidy(() => {
        const perHead = (w: tf.Tensor, heads: number) => tf.tile(tf.reshape(w, [1, hd]), [heads, 1]);
        return tf.concat([perHead(tf.mul(p[a + 'q_norm.weight'], scale), h), perHead(p[a + 'k_norm.weight'], kvh)], 0) as tf.Tensor2D;
      });
    }),
    qkScale: tf.tensor2d(Array.from({ length: h + kvh }, (_, i) => (i < h ? scale : 1)), [h + kvh, 1]),
    rotate: tf.tensor2d(rotateHalfMatrix(hd), [hd, hd]),
    unit: tf.ones([hd]),
  };
}

export function disposeDeviceDecodeWeights(w: DeviceDecodeWeights): void {
  disposeDecodeLayers(w.layers);
  tf.dispose([w.qkScale, w.rotate, w.unit, ...w.qkNorm.filter((t): t is tf.Tensor2D => t !== null)]);
}

/** The logits of each prompt's last position, from a right-padded forward's [B·T, V]: [B, V]. */
function promptEnds(logits: tf.Tensor2D, prompts: number[][], t: number): tf.Tensor2D {
  return tf.gather(logits, tf.tensor1d(Int32Array.from(prompts, (p, row) => row * t + p.length - 1), 'int32')) as tf.Tensor2D;
}

/** Read logits [n, V] back and release them. */
async function readLogits(logits: tf.Tensor): Promise<Float32Array> {
  const data = (await logits.data()) as Float32Array;
  logits.dispose();
  return data;
}

/** What a prefill gives per prompt: its last logits [V], or (sampled on the device) no logits and its first token. */
export interface PromptEnd {
  logits: Float32Array;
  token?: GeneratedToken;
}

/** Read prompts' ends back: logits [n, V] (one row each), or with picks the sampled [n, 2]; releases `ends`. */
async function readEnds(ends: tf.Tensor2D, vocab: number, picks: DeviceSampling[] | null): Promise<PromptEnd[]> {
  if (picks) return (await readSamples(ends)).map((token) => ({ logits: new Float32Array(0), token }));
  const data = await readLogits(ends);
  return Array.from({ length: data.length / vocab }, (_, row) => ({ logits: data.slice(row * vocab, (row + 1) * vocab) }));
}

/** Sampling a decode step on the device: each row's pick, and the rows whose logits are read as well. */
interface StepSampling {
  picks: DeviceSampling[];
  logitRows: number[];
}

/** A decode step's outputs: its logits [n, V]; or sampled, the rows' tokens [n, 2] and the asked rows' logits [m, V]. */
function stepOutputs(logits: tf.Tensor2D, sampling: StepSampling | null): tf.Tensor2D[] {
  if (!sampling) return [logits];
  const sampled = sampleOnDevice(logits, sampling.picks); // webgpu/sample.ts
  return sampling.logitRows.length > 0 ? [sampled, tf.gather(logits, sampling.logitRows) as tf.Tensor2D] : [sampled];
}

/** A step's logits [n, V], or with `picks` each row's token and logprob [n, 2] (stepOutputs without logit rows). */
const sampledOrNot = (logits: tf.Tensor2D, picks: DeviceSampling[] | null): tf.Tensor2D => stepOutputs(logits, picks && { picks, logitRows: [] })[0];

/** Read a sampled step's outputs back (the tokens, and the asked rows' logits where there are any) and release them. */
async function readSampledStep([picked, rows]: tf.Tensor2D[]): Promise<SampledStep> {
  return { tokens: await readSamples(picked), logits: rows ? await readLogits(rows) : new Float32Array(0) };
}

/**
 * Prefill prompts in one right-padded forward (as model.ts's prefillBatch): per prompt a device cache and its last
 * logits [V], or with `picks` (webgpu) its first token sampled on the device instead.
 */
export async function prefillOnDevice(cfg: DecoderConfig, w: ModelWeights, prompts: number[][], picks: DeviceSampling[] | null = null): Promise<({ cache: TensorKvCache } & PromptEnd)[]> {
  const { ids, b, t } = paddedPrompts(cfg, prompts);
  const { num_key_value_heads: kvh, head_dim: hd } = cfg;
  let caches: TensorKvCache[] = [];
  const last = tf.tidy(() => {
    const kv: LayerKv[] = [];
    const logits = forward(cfg, w, ids, b, t, kv); // [B·T, V]
    caches = prompts.map((p, row) => {
      // [1, len, KVH, hd] → [KVH, len, hd]
      const rows = (x: tf.Tensor4D) => tf.keep(tf.transpose(tf.reshape(tf.slice(x, [row, 0, 0, 0], [1, p.length, -1, -1]), [p.length, kvh, hd]), [1, 0, 2]) as tf.Tensor3D);
      return new TensorKvCache(
        p.length,
        kv.map((l) => rows(l.k)),
        kv.map((l) => rows(l.v)),
      );
    });
    tf.dispose(kv.flatMap((l) => [l.k, l.v])); // kept by attention(); the slices above are copies
    return sampledOrNot(promptEnds(logits, prompts, t), picks);
  });
  const ends = await readEnds(last, cfg.vocab_size, picks);
  return caches.map((cache, row) => ({ cache, ...ends[row] }));
}

/**
 * The layers of one decode step, inside a tidy: `tokens[i]` at `positions[i]` → logits [n, V]. `attend(l, qk, heads)`
 * gives layer l's attention output [n, H·hd] from qk [n, H + KVH, hd] (queries, scaled, then keys, both normalised
 * and rotated) and heads [n, H + 2·KVH, hd] (the projections; values at heads H + KVH…).
 */
function decodeLayers(cfg: DecoderConfig, w: ModelWeights, dw: DeviceDecodeWeights, tokens: number[], positions: number[], attend: (l: number, qk: tf.Tensor3D, heads: tf.Tensor3D) => tf.Tensor2D): tf.Tensor2D {
  const n = tokens.length;
  const { num_attention_heads: h, num_key_value_heads: kvh, head_dim: hd } = cfg;
  const tables = ropeTables(hd, cfg.rope_theta, positions);
  const cos = tf.tensor2d(tables.cos, [n, hd]); // one position per row
  const sin = tf.tensor2d(tables.sin, [n, hd]);
  const ropeKernel = ourKernelRuns(ROPE_KERNEL);
  const normKernel = ourKernelRuns(RMS_NORM_KERNEL);
  let x = tf.gather(w.embed, tf.tensor1d(Int32Array.from(tokens), 'int32')) as tf.Tensor2D; // [n, D]
  for (let l = 0; l < w.layers.length; l++) {
    const lw = w.layers[l];
    const fused = dw.layers[l];
    // [n, (H + 2·KVH)·hd]: the norm fused in where it pays, the bias added in the product's stores.
    const qkv = new PendingNorm(x, lw.inputNorm, cfg.rms_norm_eps).project(fused.qkv, linear, fused.qkvBias);
    const heads = tf.reshape(qkv, [n, h + 2 * kvh, hd]) as tf.Tensor3D;
    const queriesAndKeys = () => tf.slice(heads, [0, 0, 0], [n, h + kvh, hd]) as tf.Tensor3D;
    const norm = dw.qkNorm[l];
    let qk: tf.Tensor3D; // queries (scaled) then keys, normalised where the model does, and rotated
    if (ropeKernel && (!norm || normKernel)) {
      // One kernel reads the queries and keys where they are (or as the norm kernel left them, its weight one: the
      // kernel takes one weight row), applies the scale or the per-head norm weights as it reads, and rotates.
      qk = norm ? ropeHeads(fusedRmsNorm(queriesAndKeys(), dw.unit, cfg.rms_norm_eps), h + kvh, norm, cos, sin) : ropeHeads(heads, h + kvh, dw.qkScale, cos, sin);
    } else {
      qk = norm ? rmsNorm(queriesAndKeys(), norm, cfg.rms_norm_eps) : (tf.mul(queriesAndKeys(), dw.qkScale) as tf.Tensor3D);
      const turned = tf.reshape(tf.matMul(tf.reshape(qk, [n * (h + kvh), hd]) as tf.Tensor2D, dw.rotate), [n, h + kvh, hd]);
      qk = tf.add(tf.mul(qk, tf.reshape(cos, [n, 1, hd])), tf.mul(turned, tf.reshape(sin, [n, 1, hd]))) as tf.Tensor3D;
    }
    // The residual adds happen in the products' stores (matmul-add.ts).
    const y = matMulPlus(attend(l, qk, heads), lw.o, x);
    // [n, I]: norm, gate/up and SwiGLU in one kernel where it pays.
    const gated = gatedUnits(new PendingNorm(y, lw.postNorm, cfg.rms_norm_eps), { gateUp: fused.gateUp }, linear);
    x = matMulPlus(gated, lw.down, y);
  }
  return new PendingNorm(x, w.norm, cfg.rms_norm_eps).project(w.head, linear); // [n, V]: the final norm fused in where it pays
}

function checkContext(cfg: DecoderConfig, lengths: number[]): void {
  for (const length of lengths) {
    if (length >= cfg.max_position_embeddings) throw new ContextLengthError(`sequence reached the context of ${cfg.max_position_embeddings}`);
  }
}

/**
 * One decode step for a batch of sequences: `tokens[i]` is appended at position `caches[i].length`. Returns
 * logits [n, V] (row-major) and advances every cache by one.
 */
export async function decodeOnDevice(cfg: DecoderConfig, w: ModelWeights, dw: DeviceDecodeWeights, caches: TensorKvCache[], tokens: number[]): Promise<Float32Array> {
  return readLogits(tensorStep(cfg, w, dw, caches, tokens, null)[0]);
}

/**
 * decodeOnDevice, sampling each row on the device by `picks[i]` (webgpu): the rows' tokens and logprobs, and the
 * logits of `logitRows` (requests that want top logprobs).
 */
export async function decodeOnDeviceSampled(cfg: DecoderConfig, w: ModelWeights, dw: DeviceDecodeWeights, caches: TensorKvCache[], tokens: number[], picks: DeviceSampling[], logitRows: number[] = []): Promise<SampledStep> {
  return readSampledStep(tensorStep(cfg, w, dw, caches, tokens, { picks, logitRows }));
}

/** decodeOnDevice's step, recorded but not read: its outputs (stepOutputs), to release. */
function tensorStep(cfg: DecoderConfig, w: ModelWeights, dw: DeviceDecodeWeights, caches: TensorKvCache[], tokens: number[], sampling: StepSampling | null): tf.Tensor2D[] {
  const n = tokens.length;
  const { num_attention_heads: h, num_key_value_heads: kvh, head_dim: hd } = cfg;
  const rep = h / kvh;
  checkContext(
    cfg,
    caches.map((c) => c.length),
  );
  const newK: tf.Tensor3D[][] = caches.map(() => []);
  const newV: tf.Tensor3D[][] = caches.map(() => []);
  const out = recordedTogether(() =>
    stepOutputs(
      decodeLayers(
      cfg,
      w,
      dw,
      tokens,
      caches.map((c) => c.length),
      (l, qk, heads) => {
        const v = tf.slice(heads, [0, h + kvh, 0], [n, kvh, hd]) as tf.Tensor3D;
        const qRows = tf.unstack(tf.slice(qk, [0, 0, 0], [n, h, hd])) as tf.Tensor2D[]; // n × [H, hd]
        const kRows = tf.unstack(tf.slice(qk, [0, h, 0], [n, kvh, hd])) as tf.Tensor2D[]; // n × [KVH, hd]
        const vRows = tf.unstack(v) as tf.Tensor2D[];
        const outs = caches.map((cache, i) => {
          const kc = tf.keep(tf.concat([cache.k[l], tf.reshape(kRows[i], [kvh, 1, hd]) as tf.Tensor3D], 1) as tf.Tensor3D); // [KVH, len + 1, hd]
          const vc = tf.keep(tf.concat([cache.v[l], tf.reshape(vRows[i], [kvh, 1, hd]) as tf.Tensor3D], 1) as tf.Tensor3D);
          newK[i].push(kc);
          newV[i].push(vc);
          const qi = tf.reshape(qRows[i], [kvh, rep, hd]) as tf.Tensor3D; // query heads grouped by kv head, scaled
          const p = tf.softmax(tf.matMul(qi, kc, false, true)); // [KVH, rep, len + 1]
          return tf.reshape(tf.matMul(p, vc), [1, h * hd]); // [1, H·hd]
        });
        return (n === 1 ? outs[0] : tf.concat(outs, 0)) as tf.Tensor2D; // [n, H·hd]
      },
      ),
      sampling,
    ),
  );
  caches.forEach((cache, i) => {
    tf.dispose([...cache.k, ...cache.v]);
    cache.k.splice(0, cache.k.length, ...newK[i]);
    cache.v.splice(0, cache.v.length, ...newV[i]);
    cache.length += 1;
  });
  return out;
}

/** Whether this model decodes through the paged KV cache here: webgpu with the paged kernels, a shape they take. */
export function pagedDecodingRuns(cfg: DecoderConfig): boolean {
  return pagedDecodeRuns(cfg.head_dim, cfg.num_attention_heads / cfg.num_key_value_heads);
}

/**
 * Prefill prompts into the paged KV cache on webgpu (one right-padded forward, as prefillOnDevice; each layer's
 * keys and values written into the pool by one append dispatch): per prompt its sequence and its last logits [V],
 * or with `picks` its first token sampled on the device. PagedKvPoolFullError, before any work, when the pool cannot
 * hold them.
 */
export async function prefillPaged(cfg: DecoderConfig, w: ModelWeights, pool: PagedKvPool, prompts: number[][], picks: DeviceSampling[] | null = null): Promise<({ cache: PagedKvSequence } & PromptEnd)[]> {
  const { ids, b, t } = paddedPrompts(cfg, prompts);
  const { num_key_value_heads: kvh, head_dim: hd } = cfg;
  const seqs = prompts.map(() => pool.sequence());
  pool.reserve(
    seqs,
    prompts.map((p) => p.length),
  );
  try {
    const slots = new Int32Array(b * t).fill(-1); // padding rows are skipped
    prompts.forEach((p, row) => p.forEach((_, pos) => (slots[row * t + pos] = pool.slotOf(seqs[row], pos))));
    const last = tf.tidy(() => {
      const kv: LayerKv[] = [];
      const logits = forward(cfg, w, ids, b, t, kv); // [B·T, V]
      const slotsT = tf.tensor1d(slots, 'int32');
      const rows = (x: tf.Tensor4D) => tf.reshape(x, [b * t, kvh, hd]) as tf.Tensor3D;
      kv.forEach((l, layer) => pagedAppend(pool.layers[layer], rows(l.k), rows(l.v), slotsT, { kStride: kvh, kOff: 0, vStride: kvh, vOff: 0 }));
      tf.dispose(kv.flatMap((l) => [l.k, l.v])); // kept by attention(); written into the pool above
      return sampledOrNot(promptEnds(logits, prompts, t), picks);
    });
    const ends = await readEnds(last, cfg.vocab_size, picks);
    return seqs.map((cache, row) => {
      cache.length = prompts[row].length;
      cache.tokens = prompts[row].slice();
      return { cache, ...ends[row] };
    });
  } catch (err) {
    for (const s of seqs) pool.release(s);
    throw err;
  }
}

/**
 * One decode step over the paged KV cache (webgpu, see pagedDecodingRuns): as decodeOnDevice, but each layer's new
 * keys and values are written in place and the whole batch is attended by one dispatch (paged-attention.ts). Takes
 * each sequence's next page first (PagedKvPoolFullError, before any work, when the pool has too few).
 */
export async function decodePaged(cfg: DecoderConfig, w: ModelWeights, dw: DeviceDecodeWeights, seqs: PagedKvSequence[], tokens: number[]): Promise<Float32Array> {
  return tokens.length === 0 ? new Float32Array(0) : readLogits(pagedStep(cfg, w, dw, seqs, tokens, null)[0]);
}

/**
 * decodePaged, sampling each row on the device by `picks[i]`: the rows' tokens and logprobs, the step's one small
 * read, and the logits of `logitRows` (requests that want top logprobs), one more.
 */
export async function decodePagedSampled(cfg: DecoderConfig, w: ModelWeights, dw: DeviceDecodeWeights, seqs: PagedKvSequence[], tokens: number[], picks: DeviceSampling[], logitRows: number[] = []): Promise<SampledStep> {
  return tokens.length === 0 ? { tokens: [], logits: new Float32Array(0) } : readSampledStep(pagedStep(cfg, w, dw, seqs, tokens, { picks, logitRows }));
}

/** decodePaged's step (n ≥ 1), recorded but not read: its outputs (stepOutputs), to release. */
function pagedStep(cfg: DecoderConfig, w: ModelWeights, dw: DeviceDecodeWeights, seqs: PagedKvSequence[], tokens: number[], sampling: StepSampling | null): tf.Tensor2D[] {
  const n = tokens.length;
  const { num_attention_heads: h, num_key_value_heads: kvh, head_dim: hd } = cfg;
  const positions = seqs.map((s) => s.length);
  checkContext(cfg, positions);
  const pool = seqs[0].pool;
  const lengths = positions.map((p) => p + 1);
  pool.reserve(seqs, lengths);
  const { table, width } = pool.pageTable(seqs, lengths);
  const out = recordedTogether(() => {
    const tableT = tf.tensor2d(table, [n, 1 + width], 'int32'); // shared by every layer
    const logits = decodeLayers(cfg, w, dw, tokens, positions, (l, qk, heads) => {
      const y = pagedAttention(qk, qk, heads, pool.layers[l], tableT, { heads: h, kOff: h, vOff: h + kvh }); // [n, H, hd]
      return tf.reshape(y, [n, h * hd]) as tf.Tensor2D;
    });
    return stepOutputs(logits, sampling);
  });
  seqs.forEach((s, i) => {
    s.length += 1;
    s.tokens.push(tokens[i]);
  });
  return out;
}

/**
 * Continue sequences that share a kept prefix (webgpu/paged-prefix-store.ts: whole pages, `seq.length` positions)
 * by `rests[i]`: each rest runs through the model as a chain behind the prefix's keys and values, gathered from the
 * pool (model.ts treeForward's trunk: the same attention as training behind a trunk), and its own keys and values
 * are appended into new pages. Returns the last logits of each, [n, V] row-major. PagedKvPoolFullError, before any
 * work, when the pool cannot hold the rests.
 */
export async function extendPaged(cfg: DecoderConfig, w: ModelWeights, seqs: PagedKvSequence[], rests: number[][]): Promise<Float32Array> {
  return seqs.length === 0 ? new Float32Array(0) : readLogits(extendPagedStep(cfg, w, seqs, rests, null));
}

/** extendPaged, each rest's next token sampled on the device by `picks[i]` instead of its logits read back. */
export async function extendPagedSampled(cfg: DecoderConfig, w: ModelWeights, seqs: PagedKvSequence[], rests: number[][], picks: DeviceSampling[]): Promise<GeneratedToken[]> {
  return seqs.length === 0 ? [] : readSamples(extendPagedStep(cfg, w, seqs, rests, picks));
}

/** extendPaged's work (n ≥ 1), not read: the rests' last logits [n, V], or with picks the sampled [n, 2], to release. */
function extendPagedStep(cfg: DecoderConfig, w: ModelWeights, seqs: PagedKvSequence[], rests: number[][], picks: DeviceSampling[] | null): tf.Tensor2D {
  checkContext(
    cfg,
    seqs.map((s, i) => s.length + rests[i].length - 1),
  );
  seqs[0].pool.reserve(
    seqs,
    seqs.map((s, i) => s.length + rests[i].length),
  );
  const out = tf.tidy(() => {
    const rows = seqs.map((seq, i) => extendOne(cfg, w, seq, rests[i])); // n × [1, V]
    return sampledOrNot(rows.length === 1 ? rows[0] : (tf.concat(rows, 0) as tf.Tensor2D), picks);
  });
  seqs.forEach((s, i) => {
    s.length += rests[i].length;
    s.tokens.push(...rests[i]);
  });
  return out;
}

/** extendPaged for one sequence (inside its tidy): the rest's last logits [1, V]; the pool written in place. */
function extendOne(cfg: DecoderConfig, w: ModelWeights, seq: PagedKvSequence, rest: number[]): tf.Tensor2D {
  const { num_key_value_heads: kvh, head_dim: hd } = cfg;
  const { pool, length } = seq;
  if (length % PAGE_SLOTS !== 0) throw new PagedKvShapeError(`a kept prefix is whole pages, not ${length} positions`);
  const n = rest.length;
  const pagesT = tf.tensor1d(seq.pages.slice(0, length / PAGE_SLOTS), 'int32');
  const before: GroupedKv[] = pool.layers.map((layer) => {
    const held = tf.gather(layer, pagesT); // [P, 2, KVH, PAGE_SLOTS, hd]
    const grouped = (which: number) => {
      const half = tf.squeeze(tf.slice(held, [0, which, 0, 0, 0], [-1, 1, -1, -1, -1]), [1]); // [P, KVH, PAGE_SLOTS, hd]
      return tf.reshape(tf.transpose(half, [1, 0, 2, 3]), [kvh, length, hd]) as tf.Tensor3D; // [KVH, L, hd]
    };
    return { k: grouped(0), v: grouped(1) };
  });
  const chain = { parent: Int32Array.from(rest, (_, i) => i - 1), chainStart: new Int32Array(n), depth: Int32Array.from(rest, (_, i) => length + i) };
  const keep: GroupedKv[] = [];
  const logits = treeForward(cfg, w, Int32Array.from(rest), chain, Int32Array.of(n - 1), { before, keep }); // [1, V]
  const slots = tf.tensor1d(
    rest.map((_, i) => pool.slotOf(seq, length + i)),
    'int32',
  );
  const byRow = (x: tf.Tensor3D) => tf.transpose(x, [1, 0, 2]) as tf.Tensor3D; // [KVH, n, hd] → [n, KVH, hd]
  keep.forEach((kv, l) => pagedAppend(pool.layers[l], byRow(kv.k), byRow(kv.v), slots, { kStride: kvh, kOff: 0, vStride: kvh, vOff: 0 }));
  return logits;
}
