/**
 * The token-sum PPO-clip policy loss of a set of samples and its exact gradient per parameter, without an
 * optimizer step: what the equivalence check ("merged timelines train like one sample per call") compares.
 *
 *   loss = Σ_samples Σ_t mask[t] · −min(ratio_t·A_t, clip(ratio_t, 1 − clipLow, 1 + clipHigh)·A_t)
 *
 * with ratio_t = exp(logp_t − oldLogp_t). No normalisation: any constant divisor scales loss and gradients alike,
 * and a divisor that depends on how an episode is cut into samples would break the equivalence by construction.
 * Each sample runs as its own [1, T] forward (no padding), through the trainer's own model and loss functions.
 */
import * as tf from '@tensorflow/tfjs';
import type { DecoderConfig, NamedTensors, TrainSample } from '../../../../worker/common/engine.ts';
import { ppoClipLoss } from '../../../../worker/losses.ts';
import type { TrainPacking } from '../../../../worker/common/engine.ts';
import { forward, fuseWeights, targetLogprobs, toParams } from '../../../../worker/model.ts';
import { AdamW } from '../../../../worker/optimizer.ts';
import { readAllFloats } from '../../../../worker/read.ts';
import { readBatchGradients } from '../../../../worker/testing/batch-gradients.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS } from '../../../../worker/train.ts';

export interface LossAndGradients {
  loss: number;
  /**
   * Σ |each sample's loss| (where measured per sample): the scale a float32 sum's rounding error goes with, since
   * samples with advantages of both signs cancel in `loss`.
   */
  lossMagnitude?: number;
  /** Gradient of `loss` per parameter, by Hugging Face name, flattened (trainer's internal layout). */
  gradients: Record<string, Float32Array>;
}

export async function tokenSumLossAndGradients(cfg: DecoderConfig, weights: NamedTensors, samples: readonly TrainSample[], clip = { low: 0.2, high: 0.2 }): Promise<LossAndGradients> {
  const params = toParams(weights, true);
  const variables = Object.values(params) as tf.Variable[];
  const entries = Object.entries(params).map(([name, tensor]) => ({ name, variable: tensor as tf.Variable }));
  const gradients: Record<string, Float32Array> = {};
  for (const { name, variable } of entries) gradients[name] = new Float32Array(variable.size);
  let loss = 0;
  let lossMagnitude = 0;
  try {
    // One sample at a time, summed on the host: the loss is a sum over samples, and one tape per sample keeps
    // memory to one forward however many calls a group has.
    for (const sample of samples) {
      const { value, grads } = tf.variableGrads(() => {
        const t = sample.tokens.length;
        // Pred alignment: position i predicts token i + 1.
        const targets = Int32Array.from(sample.tokens.slice(1));
        const logits = forward(cfg, fuseWeights(cfg, params), Int32Array.from(sample.tokens), 1, t); // [T, V]
        const logp = targetLogprobs(tf.slice(logits, [0, 0], [t - 1, cfg.vocab_size]), targets); // [T-1]
        const ppo = ppoClipLoss(logp, tf.tensor1d(sample.oldLogprobs.slice(1)), tf.tensor1d(sample.advantages.slice(1)), clip.low, clip.high);
        return tf.sum(tf.mul(ppo.loss, tf.tensor1d(sample.lossMask.slice(1)))) as tf.Scalar;
      }, variables);
      // Read asynchronously: every backend supports it (WebGPU under Node reads no other way).
      const withGrad = entries.filter(({ variable }) => grads[variable.name]);
      const [lossValue, ...values] = await readAllFloats([value, ...withGrad.map(({ variable }) => grads[variable.name])]);
      withGrad.forEach(({ name }, i) => {
        const sum = gradients[name];
        values[i].forEach((x, j) => (sum[j] += x));
      });
      loss += lossValue[0];
      lossMagnitude += Math.abs(lossValue[0]);
      value.dispose();
      tf.dispose(Object.values(grads));
    }
    return { loss, lossMagnitude, gradients };
  } finally {
    tf.dispose(variables);
  }
}

/**
 * The same loss and gradient as the trainer computes them: the engine's micro-batched gradient (worker/train.ts
 * batchGradients) in the given packing, token-sum over the samples with divisor 1, before clipping.
 */
export async function engineLossAndGradients(cfg: DecoderConfig, weights: NamedTensors, samples: readonly TrainSample[], packing: TrainPacking, microBatchTokens = 4096, clip = { low: 0.2, high: 0.2 }): Promise<LossAndGradients & { computedTokens: number }> {
  const params = toParams(weights, true);
  const names = Object.keys(params);
  const trainable = Object.values(params) as tf.Variable[];
  try {
    const state = { cfg, params, lora: null, trainable, optimizer: new AdamW(trainable), reference: null };
    const opts = { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, clipLow: clip.low, clipHigh: clip.high, packing, microBatchTokens } as const;
    const out = await readBatchGradients(batchGradients(state, [...samples], opts));
    const gradients: Record<string, Float32Array> = {};
    names.forEach((name, i) => (gradients[name] = out.grads[i]));
    return { loss: out.loss, gradients, computedTokens: out.computedTokens };
  } finally {
    tf.dispose(trainable);
  }
}

/** ‖a − b‖ ÷ ‖b‖ over every parameter's gradient (0 when both are zero). */
export function relativeGradientError(a: Record<string, Float32Array>, b: Record<string, Float32Array>): number {
  let diff = 0;
  let norm = 0;
  for (const [name, gb] of Object.entries(b)) {
    const ga = a[name];
    for (let i = 0; i < gb.length; i++) {
      diff += (ga[i] - gb[i]) ** 2;
      norm += gb[i] ** 2;
    }
  }
  return norm === 0 ? Math.sqrt(diff) : Math.sqrt(diff / norm);
}
