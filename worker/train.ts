/**
 * One optimizer step over a batch of samples, written as one visible loop:
 *   validate → pack micro-batches by token budget → learning rate → for each micro-batch:
 *   (reference logprobs for KL) → forward + per-token loss → backward, accumulate → clip → AdamW step → metrics.
 *
 * Packing: `tree` (the default) inserts a micro-batch's samples into a prefix tree (worker/prefix-tree.ts) so a
 * prefix they share is computed once, and computes the loss at one entry per generated token of each sample;
 * `rows` right-pads each sample to a row. Both give the same loss and gradients (the token sums are the same terms).
 *
 * Alignment: the model's row position t predicts token t+1, so every per-token array is shifted by one
 * ("pred" alignment): pred[t] = sample[t + 1]. Sample position 0 is never predicted (its mask is 0 by contract).
 */
import * as tf from '@tensorflow/tfjs';
import type { DecoderConfig, TrainMetrics, TrainOptions, TrainSample } from './common/engine.ts';
import { decoupledPpoLoss, k3Kl, nllLoss, ppoClipLoss, truncatedIsLoss } from './losses.ts';
import { effectiveParams, type LoraState } from './lora.ts';
import { ContextLengthError, entropy, forward, fuseWeights, type ModelWeights, type Params, targetLogprobs, treeForward } from './model.ts';
import { buildPrefixTree, packTreeMicroBatches } from './prefix-tree.ts';
import { type AdamW, clipScale, clipScaleOnDevice, globalNorm, globalNormSquared, learningRateAt } from './optimizer.ts';
import { readsSyncOnActiveBackend } from './backend.ts';
import { readScalars } from './read.ts';

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
 * What the loss of one micro-batch reads, whichever the packing: logits at N loss positions [N, V] under given
 * weights, and per position its target, mask, advantage and old logprob [N]. Rows: every padded position (mask 0
 * where nothing is trained); tree: one position per loss entry (mask 1).
 */
interface LossInputs {
  logits: (weights: ModelWeights) => tf.Tensor2D;
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

function treeLossInputs(cfg: DecoderConfig, samples: readonly TrainSample[]): LossInputs {
  const tree = buildPrefixTree(samples);
  return {
    logits: (w) => treeForward(cfg, w, tree.ids, tree, tree.entryNode),
    targets: tree.entryTarget,
    mask: new Float32Array(tree.entryTarget.length).fill(1),
    advantages: tree.entryAdvantage,
    oldLogprobs: tree.entryOldLogprob,
    computedTokens: tree.ids.length,
  };
}

/** The micro-batches of `samples` as loss inputs, in the packing `opts` names. */
function lossMicroBatches(cfg: DecoderConfig, samples: readonly TrainSample[], opts: TrainOptions): LossInputs[] {
  if ((opts.packing ?? 'tree') === 'tree') return packTreeMicroBatches(samples, opts.microBatchTokens).map((group) => treeLossInputs(cfg, group));
  return packMicroBatches([...samples], opts.microBatchTokens).map((group) => rowsLossInputs(cfg, group));
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

/**
 * The gradient of the batch's loss, accumulated over micro-batches: each micro-batch's summed token loss is divided
 * by the batch-wide denominator, so the sum equals the gradient of the whole batch's loss whatever the packing.
 */
export function batchGradients(state: TrainState, samples: TrainSample[], opts: TrainOptions): BatchGradients {
  const { cfg } = state;
  validateSamples(cfg, samples);
  const temperature = opts.temperature ?? 1;
  const useKl = usesKl(state, opts);
  const cap = importanceCap(opts);
  const trainedTokens = samples.reduce((a, s) => a + s.lossMask.reduce((x, m) => x + (m ? 1 : 0), 0), 0);
  const denominator = opts.normalization === 'token-sum' ? tokenSumDivisor(opts, samples.length) : Math.max(1, trainedTokens);
  const microBatches = lossMicroBatches(cfg, samples, opts);
  let accumulated: tf.Tensor[] | null = null;
  const scalars: tf.Tensor[] = [];
  for (const batch of microBatches) {
    const refLp = useKl ? tf.tidy(() => targetLogprobs(batch.logits(fuseWeights(cfg, state.reference!)), batch.targets, temperature)) : null;
    // Decoupled PPO's proximal policy: these weights before the update (every micro-batch's gradient is taken
    // before the optimizer steps), recomputed without a gradient.
    const proxLp = opts.loss === 'decoupled-ppo' ? tf.tidy(() => targetLogprobs(batch.logits(fuseWeights(cfg, effectiveParams(state.params, state.lora))), batch.targets, temperature)) : null;
    const stats: tf.Tensor[] = [];
    const { value, grads } = tf.variableGrads(() => {
      const mask = tf.tensor1d(batch.mask);
      const logits = batch.logits(fuseWeights(cfg, effectiveParams(state.params, state.lora))); // [N, V]
      const logp = targetLogprobs(logits, batch.targets, temperature); // [N]
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
        stats.push(tf.keep(tf.sum(tf.mul(ppo.clipped, mask))));
        if (refLp) {
          const k3 = k3Kl(logp, refLp);
          stats.push(tf.keep(tf.sum(tf.mul(k3, mask))));
          tokenLoss = tf.add(tokenLoss, tf.mul(k3, opts.klCoef));
        }
      }
      const tokenEntropy = entropy(logits, temperature);
      stats.unshift(tf.keep(tf.sum(tf.mul(tokenEntropy, mask))));
      const entropyCoef = opts.loss !== 'sft' ? (opts.entropyCoef ?? 0) : 0;
      if (entropyCoef > 0) tokenLoss = tf.sub(tokenLoss, tf.mul(tokenEntropy, entropyCoef));
      return tf.div(tf.sum(tf.mul(tokenLoss, mask)), denominator) as tf.Scalar;
    }, state.trainable);
    refLp?.dispose();
    proxLp?.dispose();
    const ordered = state.trainable.map((v) => grads[v.name]);
    if (accumulated === null) {
      accumulated = ordered;
    } else {
      const prev: tf.Tensor[] = accumulated;
      accumulated = prev.map((g, i) => {
        const sum = tf.add(g, ordered[i]);
        g.dispose();
        ordered[i].dispose();
        return sum;
      });
    }
    scalars.push(value, ...stats);
  }
  return { grads: accumulated!, scalars, scalarLayout: { clipped: opts.loss !== 'sft', kl: useKl }, microBatches: microBatches.length, computedTokens: microBatches.reduce((a, b) => a + b.computedTokens, 0) };
}

/**
 * One optimizer step over `samples` (the schedule reads the optimizer's step count); returns the metrics.
 * Loss and statistics are read once at the end (one transfer on backends that read asynchronously).
 */
export async function trainStep(state: TrainState, samples: TrainSample[], opts: TrainOptions, policyVersionAfter: number): Promise<TrainMetrics> {
  const started = performance.now();
  const trainedTokens = samples.reduce((a, s) => a + s.lossMask.reduce((x, m) => x + (m ? 1 : 0), 0), 0);
  const totalTokens = samples.reduce((a, s) => a + s.tokens.length, 0);
  const lr = learningRateAt(opts.learningRate, state.optimizer.stepCount, opts.schedule ?? { kind: 'constant' });
  const { grads, scalars, scalarLayout, microBatches, computedTokens } = batchGradients(state, samples, opts);

  // Clip by global norm, then step. Where reads are asynchronous the clip scale stays on the device.
  let gradNorm = 0;
  if (readsSyncOnActiveBackend()) {
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
  if (!readsSyncOnActiveBackend()) gradNorm = Math.sqrt(values.pop()!);
  const { loss, entropy: ent, clipped, kl } = sumMicroBatchScalars(values, scalarLayout);

  const perToken = (x: number) => (trainedTokens > 0 ? x / trainedTokens : 0);
  return {
    loss,
    clipFraction: perToken(clipped),
    kl: perToken(kl),
    entropy: perToken(ent),
    gradNorm,
    tokens: totalTokens,
    trainedTokens,
    microBatches,
    computedTokens,
    packing: opts.packing ?? 'tree',
    timeMs: performance.now() - started,
    policyVersion: policyVersionAfter,
  };
}
