/**
 * One training step over a batch of samples, written as one visible loop:
 *   validate → split into mini-batches (one by default) → for each epoch and mini-batch, one optimizer update:
 *   pack micro-batches by token budget → learning rate → for each micro-batch:
 *   (reference logprobs for KL) → forward + per-token loss → backward, accumulate → clip → AdamW step → metrics.
 *
 * Packing: `tree` (the default) inserts a micro-batch's samples into a prefix tree (worker/prefix-tree.ts) so a
 * prefix they share is computed once, and computes the loss at one entry per generated token of each sample;
 * `rows` right-pads each sample to a row. Both give the same loss and gradients (the token sums are the same terms).
 *
 * Trunks (tree packing): a prefix all the samples of several micro-batches share (a GRPO group's opening, once its
 * timelines are too long for one micro-batch) is computed once per step rather than once per micro-batch
 * (prefix-tree.ts planTreeRuns). The trunk's keys and values are computed first, without a gradient; each
 * micro-batch behind it sees them as extra keys and takes them as inputs of its gradient, so it also returns dK and
 * dV for them, summed over the run; then the trunk's own pass differentiates its own loss entries plus
 * Σ_layers ⟨K, ΣdK⟩ + ⟨V, ΣdV⟩ (the sums constants) — the chain rule through the trunk, done once. So the trunk
 * is forwarded twice (tfjs keeps no tape across calls: its first forward is a checkpoint) and backpropagated once,
 * and the loss and every gradient stay those of the samples trained one by one.
 *
 * Mixed precision (TrainState.lossScaler, webgpu with shader-f16; worker/precision.ts decides): the forward and
 * backward products read f16 (webgpu/matmul.ts withF16Matmuls; the master weights' f16 copies are refreshed after
 * each optimizer step) and sum in f32; the loss is scaled (worker/loss-scale.ts) and the f32 gradients unscaled,
 * accumulated, clipped and applied by AdamW in f32 as in f32 training. The step reads the gradients' norm before
 * the optimizer runs (one more wait for the device) to skip a step whose gradients overflowed.
 *
 * Alignment: the model's row position t predicts token t+1, so every per-token array is shifted by one
 * ("pred" alignment): pred[t] = sample[t + 1]. Sample position 0 is never predicted (its mask is 0 by contract).
 */
import * as tf from '@tensorflow/tfjs';
import type { DecoderConfig, TrainMetrics, TrainOptions, TrainSample } from './common/engine.ts';
import { decoupledPpoLoss, k3Kl, nllLoss, ppoClipLoss, truncatedIsLoss } from './losses.ts';
import { effectiveParams, type LoraAdapters, type LoraState } from './lora.ts';
import { ContextLengthError, entropy, forward, fuseWeights, type GroupedKv, type ModelWeights, type Params, targetLogprobs, treeForward, type TrunkKeys } from './model.ts';
import { buildPrefixTree, buildSuffixTree, buildTrunk, type PackedTree, planTreeRuns } from './prefix-tree.ts';
import { disposeKv, trunkInputs, trunkSurrogate } from './trunk.ts';
import { type AdamW, clipScale, clipScaleOnDevice, globalNorm, globalNormSquared, learningRateAt } from './optimizer.ts';
import { readsSyncOnActiveBackend } from './backend.ts';
import { readScalars } from './read.ts';
import type { LossScaler } from './loss-scale.ts';
import { holdF16Copies, withF16Matmuls } from './webgpu/matmul.ts';

/** The embedding table's name (HF): a product reads it only as a tied head. */
const EMBEDDING = 'model.embed_tokens.weight';

export class InvalidSampleError extends Error {
  override name = 'InvalidSampleError';
}

export class InvalidTrainOptionsError extends Error {
  override name = 'InvalidTrainOptionsError';
}

/** Engine defaults for TrainOptions fields the caller leaves out. */
export const DEFAULT_TRAIN_OPTIONS: TrainOptions = {
  loss: 'ppo',
  clipLow: 0.2,
  clipHigh: 0.28,
  klCoef: 0,
  normalization: 'token-mean',
  microBatchTokens: 4096,
  learningRate: 1e-5,
  weightDecay: 0.01,
  maxGradNorm: 1,
  packing: 'tree',
};

export interface TrainState {
  cfg: DecoderConfig;
  /** All base parameters (variables when training the full model). */
  params: Params;
  lora: LoraState | null;
  /** The variables the optimizer updates (base params, or the LoRA adapters). */
  trainable: tf.Variable[];
  optimizer: AdamW;
  /** Frozen weights for the KL term (effective weights at the time of the snapshot), or null. */
  reference: Params | null;
  /** Present: train in mixed precision with this loss scaler (see the module comment); absent or null: f32. */
  lossScaler?: LossScaler | null;
}

export function validateSamples(cfg: DecoderConfig, samples: TrainSample[]): void {
  if (samples.length === 0) throw new InvalidSampleError('trainStep needs at least one sample');
  samples.forEach((s, i) => {
    const n = s.tokens.length;
    if (n < 2) throw new InvalidSampleError(`sample ${i}: needs at least 2 tokens`);
    if (s.lossMask.length !== n || s.advantages.length !== n || s.oldLogprobs.length !== n) {
      throw new InvalidSampleError(`sample ${i}: tokens, lossMask, advantages and oldLogprobs must have the same length`);
    }
    if (n > cfg.max_position_embeddings) throw new ContextLengthError(`sample ${i}: ${n} tokens exceed the context of ${cfg.max_position_embeddings}`);
    if (s.tokens.some((t) => !Number.isInteger(t) || t < 0 || t >= cfg.vocab_size)) throw new InvalidSampleError(`sample ${i}: token id outside the vocabulary`);
    if (s.lossMask[0] !== 0) throw new InvalidSampleError(`sample ${i}: lossMask[0] must be 0 (position 0 is never predicted)`);
    if (s.advantages.some((a) => !Number.isFinite(a)) || s.oldLogprobs.some((a) => !Number.isFinite(a))) throw new InvalidSampleError(`sample ${i}: advantages and oldLogprobs must be finite`);
  });
}

/**
 * Group samples (longest first) so that rows × longest row ≤ `tokenBudget`; a sample longer than the budget gets
 * a micro-batch of its own. Right-padding to the longest row wastes little once rows are sorted by length.
 */
export function packMicroBatches<T extends { tokens: number[] }>(samples: T[], tokenBudget: number): T[][] {
  const sorted = [...samples].sort((a, b) => b.tokens.length - a.tokens.length);
  const batches: T[][] = [];
  let current: T[] = [];
  for (const s of sorted) {
    const width = current.length > 0 ? current[0].tokens.length : s.tokens.length;
    if (current.length > 0 && (current.length + 1) * width > tokenBudget) {
      batches.push(current);
      current = [];
    }
    current.push(s);
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** A micro-batch as padded row-major arrays in pred alignment. */
interface PackedRows {
  b: number;
  t: number;
  ids: Int32Array; // [B·T] input tokens
  targets: Int32Array; // [B·T] tokens[t + 1] (0 past the end)
  mask: Float32Array; // [B·T] lossMask[t + 1]
  advantages: Float32Array;
  oldLogprobs: Float32Array;
}

function packRows(samples: readonly TrainSample[]): PackedRows {
  const b = samples.length;
  const t = Math.max(...samples.map((s) => s.tokens.length));
  const r: PackedRows = { b, t, ids: new Int32Array(b * t), targets: new Int32Array(b * t), mask: new Float32Array(b * t), advantages: new Float32Array(b * t), oldLogprobs: new Float32Array(b * t) };
  samples.forEach((s, row) => {
    const n = s.tokens.length;
    for (let i = 0; i < n; i++) r.ids[row * t + i] = s.tokens[i];
    for (let i = 0; i + 1 < n; i++) {
      const o = row * t + i;
      r.targets[o] = s.tokens[i + 1];
      r.mask[o] = s.lossMask[i + 1] ? 1 : 0;
      r.advantages[o] = s.advantages[i + 1];
      r.oldLogprobs[o] = s.oldLogprobs[i + 1];
    }
  });
  return r;
}

/**
 * What the loss of one micro-batch (or a trunk's own pass) reads, whichever the packing: logits at N loss positions
 * [N, V] under given weights (and, for the tree, a trunk's keys in front or a list to keep its own in), and per
 * position its target, mask, advantage and old logprob [N]. Rows: every padded position (mask 0 where nothing is
 * trained); tree: one position per loss entry (mask 1).
 */
interface LossInputs {
  logits: (weights: ModelWeights, trunk?: TrunkKeys) => tf.Tensor2D;
  targets: Int32Array;
  mask: Float32Array;
  advantages: Float32Array;
  oldLogprobs: Float32Array;
  /** Tokens the forward computes (padding or a shared prefix once per micro-batch included). */
  computedTokens: number;
}

function rowsLossInputs(cfg: DecoderConfig, samples: readonly TrainSample[]): LossInputs {
  const rows = packRows(samples);
  return { ...rows, logits: (w) => forward(cfg, w, rows.ids, rows.b, rows.t), computedTokens: rows.b * rows.t };
}

function treeLossInputs(cfg: DecoderConfig, tree: PackedTree): LossInputs {
  return {
    logits: (w, trunk) => treeForward(cfg, w, tree.ids, tree, tree.entryNode, trunk),
    targets: tree.entryTarget,
    mask: new Float32Array(tree.entryTarget.length).fill(1),
    advantages: tree.entryAdvantage,
    oldLogprobs: tree.entryOldLogprob,
    computedTokens: tree.ids.length,
  };
}

/** Micro-batches that train behind one trunk (its own pass's inputs: a chain of the trunk's tokens), or alone. */
interface LossRun {
  trunk: LossInputs | null;
  microBatches: LossInputs[];
}

/** The micro-batches of `samples` as loss inputs, in the packing `opts` names (trunks with the tree). */
function lossRuns(cfg: DecoderConfig, samples: readonly TrainSample[], opts: TrainOptions): LossRun[] {
  if ((opts.packing ?? 'tree') === 'tree') {
    return planTreeRuns(samples, opts.microBatchTokens).map(({ trunkLength, microBatches }) =>
      trunkLength > 0
        ? { trunk: treeLossInputs(cfg, buildTrunk(microBatches.flat(), trunkLength)), microBatches: microBatches.map((group) => treeLossInputs(cfg, buildSuffixTree(group, trunkLength))) }
        : { trunk: null, microBatches: microBatches.map((group) => treeLossInputs(cfg, buildPrefixTree(group))) },
    );
  }
  return packMicroBatches([...samples], opts.microBatchTokens).map((group) => ({ trunk: null, microBatches: [rowsLossInputs(cfg, group)] }));
}

/** Per-position logprobs of the next token [B·T] (pred alignment) under `params`. */
function packedLogprobs(cfg: DecoderConfig, params: Params, rows: PackedRows, temperature: number): tf.Tensor1D {
  const logits = forward(cfg, fuseWeights(cfg, params), rows.ids, rows.b, rows.t); // [B·T, V]
  return targetLogprobs(logits, rows.targets, temperature); // [B·T]
}

/** Logprob of every token under `params`: index t holds log p(tokens[t] | tokens[<t]); index 0 is 0. */
export async function sequenceLogprobs(cfg: DecoderConfig, params: Params, sequences: number[][], tokenBudget: number): Promise<number[][]> {
  const out: number[][] = new Array(sequences.length);
  const indexed = sequences.map((tokens, index) => ({ tokens, index }));
  for (const group of packMicroBatches(indexed, tokenBudget)) {
    const rows = packRows(group.map((g) => ({ tokens: g.tokens, lossMask: g.tokens.map(() => 0), advantages: g.tokens.map(() => 0), oldLogprobs: g.tokens.map(() => 0) })));
    const lp = tf.tidy(() => packedLogprobs(cfg, params, rows, 1));
    // wasm/cpu read without yielding: scoring stays atomic against a weight update there, as it always was.
    const data = (readsSyncOnActiveBackend() ? lp.dataSync() : await lp.data()) as Float32Array;
    group.forEach((g, row) => {
      const res = [0];
      for (let i = 0; i + 1 < g.tokens.length; i++) res.push(data[row * rows.t + i]);
      out[g.index] = res;
    });
    lp.dispose();
  }
  return out;
}

/** The token-sum divisor: the caller's constant (e.g. episodes in the batch, whatever the packing), else the sample count. */
function tokenSumDivisor(opts: TrainOptions, sampleCount: number): number {
  const divisor = opts.lossDivisor ?? sampleCount;
  if (!Number.isFinite(divisor) || divisor <= 0) throw new InvalidTrainOptionsError(`lossDivisor must be a positive finite number, got ${divisor}`);
  return divisor;
}

/** The KL term applies to the policy losses, when asked for and a reference is frozen. */
function usesKl(state: TrainState, opts: TrainOptions): boolean {
  return opts.loss !== 'sft' && opts.klCoef > 0 && state.reference !== null;
}

/** The importance-weight cap of the off-policy losses (see worker/losses.ts). */
const DEFAULT_IMPORTANCE_CAP = 2;

function importanceCap(opts: TrainOptions): number {
  const cap = opts.importanceCap ?? DEFAULT_IMPORTANCE_CAP;
  if (!(cap >= 1) || !Number.isFinite(cap)) throw new InvalidTrainOptionsError(`importanceCap must be a finite number ≥ 1, got ${cap}`);
  return cap;
}

export interface ScalarLayout {
  clipped: boolean;
  kl: boolean;
}

/** The batch's sums of the micro-batches' scalars, read back in order: [loss, entropy sum, (clipped), (k3)] each. */
export function sumMicroBatchScalars(values: ArrayLike<number>, layout: ScalarLayout): { loss: number; entropy: number; clipped: number; kl: number } {
  const per = 2 + (layout.clipped ? 1 : 0) + (layout.kl ? 1 : 0);
  const sums = { loss: 0, entropy: 0, clipped: 0, kl: 0 };
  for (let i = 0; i + per <= values.length; i += per) {
    sums.loss += values[i];
    sums.entropy += values[i + 1];
    if (layout.clipped) sums.clipped += values[i + 2];
    if (layout.kl) sums.kl += values[i + 3];
  }
  return sums;
}

/** The summed gradient of a batch's loss (before clipping), with the per-micro-batch statistics still on the device. */
export interface BatchGradients {
  /** One per trainable variable, in `state.trainable` order. */
  grads: tf.Tensor[];
  /** Per micro-batch: [loss, entropy sum, (clipped count), (k3 sum)] as scalars. */
  scalars: tf.Tensor[];
  /** What each micro-batch's scalars hold beyond loss and entropy: the clipped count (policy losses), the k3 sum. */
  scalarLayout: ScalarLayout;
  microBatches: number;
  computedTokens: number;
}

/** How a batch's loss terms are computed (from the options, fixed for the step). */
interface LossSettings {
  opts: TrainOptions;
  temperature: number;
  cap: number;
  /** The batch-wide divisor of every micro-batch's token sum. */
  denominator: number;
  useKl: boolean;
}

/**
 * The loss of one pass's entries ÷ the batch's denominator, from their logits [N, V] under the policy and the
 * reference and proximal logprobs [N] (when the options use them); pushes the pass's kept statistics to `stats`:
 * entropy sum, then (policy losses) the clipped count and (KL) the k3 sum.
 */
function entryLoss(settings: LossSettings, batch: LossInputs, logits: tf.Tensor2D, refLp: tf.Tensor1D | null, proxLp: tf.Tensor1D | null, stats: tf.Tensor[]): tf.Scalar {
  const { opts, temperature, cap } = settings;
  const mask = tf.tensor1d(batch.mask);
  const logp = targetLogprobs(logits, batch.targets, temperature); // [N]
  const own: tf.Tensor[] = [];
  let tokenLoss: tf.Tensor1D;
  if (opts.loss === 'sft') {
    tokenLoss = nllLoss(logp);
  } else {
    const behaviour = tf.tensor1d(batch.oldLogprobs);
    const advantages = tf.tensor1d(batch.advantages);
    const ppo =
      opts.loss === 'decoupled-ppo'
        ? decoupledPpoLoss(logp, proxLp!, behaviour, advantages, opts.clipLow, opts.clipHigh, cap)
        : opts.loss === 'truncated-is'
          ? truncatedIsLoss(logp, behaviour, advantages, cap)
          : ppoClipLoss(logp, behaviour, advantages, opts.clipLow, opts.clipHigh);
    tokenLoss = ppo.loss;
    own.push(tf.keep(tf.sum(tf.mul(ppo.clipped, mask))));
    if (refLp) {
      const k3 = k3Kl(logp, refLp);
      own.push(tf.keep(tf.sum(tf.mul(k3, mask))));
      tokenLoss = tf.add(tokenLoss, tf.mul(k3, opts.klCoef));
    }
  }
  const tokenEntropy = entropy(logits, temperature);
  stats.push(tf.keep(tf.sum(tf.mul(tokenEntropy, mask))), ...own);
  const entropyCoef = opts.loss !== 'sft' ? (opts.entropyCoef ?? 0) : 0;
  if (entropyCoef > 0) tokenLoss = tf.sub(tokenLoss, tf.mul(tokenEntropy, entropyCoef));
  return tf.div(tf.sum(tf.mul(tokenLoss, mask)), settings.denominator) as tf.Scalar;
}

/** What each pass's scalars hold beyond loss and entropy: the clipped count (policy losses), the k3 sum. */
function scalarLayoutOf(settings: LossSettings): ScalarLayout {
  return { clipped: settings.opts.loss !== 'sft', kl: settings.useKl };
}

/** The loss (0) and kept statistics (0 each, in `layout`) of a pass without loss entries. */
function noEntries(layout: ScalarLayout, stats: tf.Tensor[]): tf.Scalar {
  const count = 1 + (layout.clipped ? 1 : 0) + (layout.kl ? 1 : 0);
  for (let i = 0; i < count; i++) stats.push(tf.keep(tf.scalar(0)));
  return tf.scalar(0);
}

/** Logprobs of a pass's targets [N] without a gradient (reference or proximal), behind the trunk keys `before`. */
function constantLogprobs(settings: LossSettings, batch: LossInputs, weights: () => ModelWeights, before: GroupedKv[] | null): tf.Tensor1D {
  return tf.tidy(() => targetLogprobs(batch.logits(weights(), { before }), batch.targets, settings.temperature));
}

/**
 * A trunk's keys and values per layer, without a gradient, under `weights`, and its own entries' logprobs when
 * `logprobs` (the reference's for KL; the proximal policy's for decoupled PPO): null when not asked or it has none.
 */
function trunkKeys(settings: LossSettings, trunk: LossInputs, weights: () => ModelWeights, logprobs: boolean): { kv: GroupedKv[]; logprobs: tf.Tensor1D | null } {
  const lp = logprobs && trunk.targets.length > 0;
  // Out of the tidy as one flat list (k_0, v_0, k_1, v_1, …, then the logprobs): what tf.tidy can hand back.
  const flat = tf.tidy(() => {
    const keep: GroupedKv[] = [];
    const logits = trunk.logits(weights(), { keep });
    return [...keep.flatMap(({ k, v }) => [k, v]), ...(lp ? [targetLogprobs(logits, trunk.targets, settings.temperature)] : [])];
  });
  const layers = Math.floor(flat.length / 2);
  return { kv: Array.from({ length: layers }, (_, l) => ({ k: flat[2 * l] as tf.Tensor3D, v: flat[2 * l + 1] as tf.Tensor3D })), logprobs: lp ? (flat[2 * layers] as tf.Tensor1D) : null };
}

/** Add `grads` into `sums` in place, disposing the addends; a gradient a pass does not produce (a parameter it does not reach) adds nothing. */
function accumulate(sums: (tf.Tensor | null)[], grads: (tf.Tensor | undefined)[]): void {
  grads.forEach((g, i) => {
    if (!g) return;
    const prev = sums[i];
    sums[i] = prev ? tf.add(prev, g) : g;
    if (prev) {
      prev.dispose();
      g.dispose();
    }
  });
}

/**
 * The gradient of the batch's loss, accumulated over micro-batches: each micro-batch's summed token loss is divided
 * by the batch-wide denominator, so the sum equals the gradient of the whole batch's loss whatever the packing.
 * A run of micro-batches behind a trunk goes: trunk keys (no gradient) → each micro-batch, its gradient taken for
 * the parameters and the trunk's keys → the trunk's own pass with the summed key gradients (see the module comment).
 * With `lossScale` (a power of two) every pass differentiates its loss times the scale, and the summed gradients are
 * divided by it at the end; the statistics are unscaled.
 */
export function batchGradients(state: TrainState, samples: TrainSample[], opts: TrainOptions, lossScale = 1, proximalWeights: StartingWeights | null = null): BatchGradients {
  const { cfg } = state;
  validateSamples(cfg, samples);
  const useKl = usesKl(state, opts);
  const trainedTokens = samples.reduce((a, s) => a + s.lossMask.reduce((x, m) => x + (m ? 1 : 0), 0), 0);
  const settings: LossSettings = {
    opts,
    temperature: opts.temperature ?? 1,
    cap: importanceCap(opts),
    denominator: opts.normalization === 'token-sum' ? tokenSumDivisor(opts, samples.length) : Math.max(1, trainedTokens),
    useKl,
  };
  const layout = scalarLayoutOf(settings);
  const policy = () => fuseWeights(cfg, effectiveParams(state.params, state.lora));
  const reference = () => fuseWeights(cfg, state.reference!);
  // Decoupled PPO's proximal policy: the weights before the step's first update, recomputed without a gradient —
  // these weights (every micro-batch's gradient is taken before the optimizer steps), or, for a later update of a
  // step of several, the copy taken before the first (`proximalWeights`).
  const decoupled = opts.loss === 'decoupled-ppo';
  const proximal = proximalWeights ? () => fuseWeights(cfg, effectiveParams(proximalWeights.params, proximalWeights.lora)) : null;
  const runs = lossRuns(cfg, samples, opts);
  const scaled = (loss: tf.Scalar): tf.Scalar => (lossScale === 1 ? loss : tf.mul(loss, lossScale));
  const accumulated: (tf.Tensor | null)[] = state.trainable.map(() => null);
  const scalars: tf.Tensor[] = [];
  let microBatches = 0;
  let computedTokens = 0;
  for (const run of runs) {
    // The trunk's keys under the policy (a micro-batch's gradient inputs) and under the reference (for its KL).
    const policyTrunk = run.trunk ? trunkKeys(settings, run.trunk, policy, decoupled && !proximal) : null;
    const refTrunk = run.trunk && useKl ? trunkKeys(settings, run.trunk, reference, true) : null;
    const proxTrunk = run.trunk && decoupled && proximal ? trunkKeys(settings, run.trunk, proximal, true) : null;
    const inputs = policyTrunk ? trunkInputs(policyTrunk.kv) : null;
    const inputVariables = inputs ? inputs.flatMap((kv) => [kv.k, kv.v] as tf.Variable[]) : [];
    const keyGrads: (tf.Tensor | null)[] = inputVariables.map(() => null);
    for (const batch of run.microBatches) {
      const refLp = useKl ? constantLogprobs(settings, batch, reference, refTrunk?.kv ?? null) : null;
      const proxLp = !decoupled ? null : proximal ? constantLogprobs(settings, batch, proximal, proxTrunk?.kv ?? null) : constantLogprobs(settings, batch, policy, inputs);
      const stats: tf.Tensor[] = [];
      const { value, grads } = tf.variableGrads(() => scaled(entryLoss(settings, batch, batch.logits(policy(), { before: inputs }), refLp, proxLp, stats)), [...state.trainable, ...inputVariables]);
      tf.dispose([refLp, proxLp].filter((t): t is tf.Tensor1D => t !== null));
      accumulate(accumulated, state.trainable.map((v) => grads[v.name]));
      accumulate(keyGrads, inputVariables.map((v) => grads[v.name]));
      scalars.push(lossScale === 1 ? value : unscale(value, lossScale), ...stats);
      microBatches++;
      computedTokens += batch.computedTokens;
    }
    if (run.trunk && policyTrunk && inputs) {
      const trunk = run.trunk;
      const stats: tf.Tensor[] = [];
      let loss: tf.Scalar | null = null;
      const { value, grads } = tf.variableGrads(() => {
        const keep: GroupedKv[] = [];
        const logits = trunk.logits(policy(), { keep });
        // A trunk of prompt tokens has no entries of its own: only the chain rule to its keys.
        loss = tf.keep(trunk.targets.length > 0 ? entryLoss(settings, trunk, logits, refTrunk?.logprobs ?? null, proxTrunk?.logprobs ?? policyTrunk.logprobs, stats) : noEntries(layout, stats));
        // The key gradients came from scaled losses already: only the trunk's own loss is scaled here.
        return tf.add(scaled(loss), trunkSurrogate(keep, keyGrads)) as tf.Scalar;
      }, state.trainable);
      value.dispose();
      accumulate(accumulated, state.trainable.map((v) => grads[v.name]));
      scalars.push(loss!, ...stats);
      computedTokens += trunk.computedTokens;
      tf.dispose(keyGrads.filter((g): g is tf.Tensor => g !== null));
      tf.dispose(inputVariables);
      disposeKv(policyTrunk.kv);
      tf.dispose(policyTrunk.logprobs ? [policyTrunk.logprobs] : []);
      for (const held of [refTrunk, proxTrunk]) {
        if (!held) continue;
        disposeKv(held.kv);
        tf.dispose(held.logprobs ? [held.logprobs] : []);
      }
    }
  }
  const sums = accumulated.map((g, i) => g ?? tf.zerosLike(state.trainable[i]));
  const grads = lossScale === 1 ? sums : sums.map((g) => unscale(g, lossScale));
  return { grads, scalars, scalarLayout: layout, microBatches, computedTokens };
}

/** `t` ÷ `scale` (exact for a power of two), disposing `t`. */
function unscale<T extends tf.Tensor>(t: T, scale: number): T {
  const out = tf.mul(t, 1 / scale) as T;
  t.dispose();
  return out;
}

/**
 * The weights that mixed-precision products read from held f16 copies: the model's and the reference's matrices
 * (the embedding table only when tied: then the head's product reads it, model.ts headLogits; else a gather does).
 */
function masterWeights(state: TrainState): tf.Tensor[] {
  // With LoRA the products read base + adapter sums made in each forward: nothing to hold.
  if (state.lora) return [];
  const tied = state.cfg.tie_word_embeddings;
  const matrices = (p: Params) => Object.entries(p).filter(([name, t]) => t.rank === 2 && (tied || name !== EMBEDDING));
  return [...matrices(state.params), ...(state.reference ? matrices(state.reference) : [])].map(([, t]) => t);
}

/** What one optimizer update measured: its loss terms summed over its tokens, its gradient norm, its passes. */
interface UpdateResult {
  loss: number;
  entropy: number;
  clipped: number;
  kl: number;
  gradNorm: number;
  microBatches: number;
  computedTokens: number;
  lossScale: { scale: number; skipped: boolean } | null;
}

/**
 * One optimizer update over `samples` (the schedule reads the optimizer's step count), with `proximalWeights` as
 * decoupled PPO's proximal policy when the update is not its step's first. Loss and statistics are read once at the
 * end (one transfer on backends that read asynchronously).
 */
async function update(state: TrainState, samples: TrainSample[], opts: TrainOptions, proximalWeights: StartingWeights | null): Promise<UpdateResult> {
  const lr = learningRateAt(opts.learningRate, state.optimizer.stepCount, opts.schedule ?? { kind: 'constant' });
  const scaler = state.lossScaler ?? null;
  if (scaler) holdF16Copies(masterWeights(state)); // made for the first step; after it, refreshed below
  const { grads, scalars, scalarLayout, microBatches, computedTokens } = scaler
    ? withF16Matmuls(() => batchGradients(state, samples, opts, scaler.scale, proximalWeights))
    : batchGradients(state, samples, opts, 1, proximalWeights);

  // Clip by global norm, then step. Where reads are asynchronous the clip scale stays on the device.
  let gradNorm = 0;
  let lossScale: { scale: number; skipped: boolean } | null = null;
  if (scaler) {
    // Mixed precision: whether the step applies depends on its gradients being finite, read before the step.
    const normSquared = globalNormSquared(grads);
    const scale = clipScaleOnDevice(normSquared, opts.maxGradNorm);
    const [value] = await readScalars([normSquared]); // the clip scale was recorded from it already
    gradNorm = Math.sqrt(value);
    lossScale = scaler.update(Number.isFinite(value));
    if (!lossScale.skipped) {
      state.optimizer.step(grads, lr, opts.weightDecay, scale);
      holdF16Copies(masterWeights(state));
    }
    scale.dispose();
  } else if (readsSyncOnActiveBackend()) {
    gradNorm = globalNorm(grads);
    state.optimizer.step(grads, lr, opts.weightDecay, clipScale(gradNorm, opts.maxGradNorm));
  } else {
    const normSquared = globalNormSquared(grads);
    const scale = clipScaleOnDevice(normSquared, opts.maxGradNorm);
    state.optimizer.step(grads, lr, opts.weightDecay, scale);
    scale.dispose();
    scalars.push(normSquared);
  }
  for (const g of grads) g.dispose();

  const values = await readScalars(scalars);
  if (!scaler && !readsSyncOnActiveBackend()) gradNorm = Math.sqrt(values.pop()!);
  const { loss, entropy, clipped, kl } = sumMicroBatchScalars(values, scalarLayout);
  return { loss, entropy, clipped, kl, gradNorm, microBatches, computedTokens, lossScale };
}

/** Most optimizer updates one step may make (epochs × mini-batches): beyond it a step is a training run of its own. */
const MAX_UPDATES_PER_STEP = 64;

/**
 * The step's samples in `miniBatches` consecutive parts (at most one per sample) of sizes differing by at most one
 * (a group's samples, adjacent, mostly stay together, so their shared prefix is still computed once), and each
 * part's share of the token-sum divisor (its share of the samples), so that every update weighs a token as a
 * one-update step would.
 */
function miniBatchesOf(samples: TrainSample[], opts: TrainOptions): { samples: TrainSample[]; opts: TrainOptions }[] {
  const asked = opts.miniBatches ?? 1;
  const epochs = opts.epochs ?? 1;
  if (!Number.isInteger(asked) || asked < 1) throw new InvalidTrainOptionsError(`miniBatches must be a positive integer, got ${asked}`);
  if (!Number.isInteger(epochs) || epochs < 1) throw new InvalidTrainOptionsError(`epochs must be a positive integer, got ${epochs}`);
  if (asked * epochs > MAX_UPDATES_PER_STEP) throw new InvalidTrainOptionsError(`epochs × miniBatches is ${asked * epochs}; at most ${MAX_UPDATES_PER_STEP} updates a step`);
  const count = Math.min(asked, samples.length);
  if (count === 1) return [{ samples, opts }];
  const divisor = tokenSumDivisor(opts, samples.length);
  const parts: { samples: TrainSample[]; opts: TrainOptions }[] = [];
  for (let i = 0, from = 0; i < count; i++) {
    const to = Math.round(((i + 1) * samples.length) / count);
    parts.push({ samples: samples.slice(from, to), opts: { ...opts, lossDivisor: (divisor * (to - from)) / samples.length } });
    from = to;
  }
  return parts;
}

/**
 * One training step over `samples`: one optimizer update, or `epochs` passes of `miniBatches` updates (PPO's
 * mini-batch epochs) — the policy version advances once either way. Every update's ratio is taken against where the
 * step began: the behaviour logprobs (`ppo`, `truncated-is`), or, for `decoupled-ppo`, the weights before the first
 * update (held as a copy for the step's later updates). Returns the metrics: the mean loss, entropy and clip share
 * over the updates, the last update's gradient norm.
 */
export async function trainStep(state: TrainState, samples: TrainSample[], opts: TrainOptions, policyVersionAfter: number): Promise<TrainMetrics> {
  const started = performance.now();
  validateSamples(state.cfg, samples);
  const trainedTokens = samples.reduce((a, s) => a + s.lossMask.reduce((x, m) => x + (m ? 1 : 0), 0), 0);
  const totalTokens = samples.reduce((a, s) => a + s.tokens.length, 0);
  const parts = miniBatchesOf(samples, opts);
  const epochs = opts.epochs ?? 1;
  const updates = parts.length * epochs;
  const proximalWeights = opts.loss === 'decoupled-ppo' && updates > 1 ? startingWeights(state) : null;
  const results: UpdateResult[] = [];
  try {
    for (let epoch = 0; epoch < epochs; epoch++) {
      // The first update's proximal policy is the weights as they are: nothing to recompute from the copy.
      for (const part of parts) results.push(await update(state, part.samples, part.opts, results.length === 0 ? null : proximalWeights));
    }
  } finally {
    if (proximalWeights) disposeStartingWeights(proximalWeights);
  }
  const sum = (f: (r: UpdateResult) => number) => results.reduce((a, r) => a + f(r), 0);
  // Per trained token, over every update (each update sees a part's tokens once per epoch).
  const perToken = (x: number) => (trainedTokens > 0 ? x / (trainedTokens * epochs) : 0);
  const last = results[results.length - 1];
  return {
    // Each update's loss is on a whole step's scale (miniBatchesOf): their mean.
    loss: sum((r) => r.loss) / updates,
    clipFraction: perToken(sum((r) => r.clipped)),
    kl: perToken(sum((r) => r.kl)),
    entropy: perToken(sum((r) => r.entropy)),
    gradNorm: last.gradNorm,
    tokens: totalTokens,
    trainedTokens,
    microBatches: sum((r) => r.microBatches),
    computedTokens: sum((r) => r.computedTokens),
    packing: opts.packing ?? 'tree',
    timeMs: performance.now() - started,
    policyVersion: policyVersionAfter,
    precision: state.lossScaler ? 'mixed' : 'f32',
    ...(updates > 1 ? { updates } : {}),
    ...(last.lossScale ? { lossScale: last.lossScale.scale, skippedStep: results.some((r) => r.lossScale?.skipped) } : {}),
  };
}

/**
 * The weights a step began with, kept while its updates change the trainable ones: a copy of every weight, or with
 * LoRA of the adapters only (the base does not train), and `own` says which tensors the copy holds.
 */
export interface StartingWeights {
  params: Params;
  lora: LoraAdapters | null;
  own: tf.Tensor[];
}

/** Copies of `tensors` by name that the optimizer's assignments leave as they are (as the KL reference is taken). */
function copies(tensors: Record<string, tf.Tensor>): Record<string, tf.Tensor> {
  return tf.tidy(() => Object.fromEntries(Object.entries(tensors).map(([name, t]) => [name, tf.keep(t.clone())])));
}

function startingWeights(state: TrainState): StartingWeights {
  if (state.lora) {
    const [a, b] = [copies(state.lora.a), copies(state.lora.b)];
    return { params: state.params, lora: { scale: state.lora.scale, a, b }, own: [...Object.values(a), ...Object.values(b)] };
  }
  const params = copies(state.params) as Params;
  return { params, lora: null, own: Object.values(params) };
}

function disposeStartingWeights(w: StartingWeights): void {
  tf.dispose(w.own);
}
