/**
 * Per-token losses for RL and supervised fine-tuning. Inputs are aligned per predicted token ([N]); masking and
 * normalisation happen in train.ts.
 *
 * PPO-clip (Schulman et al. 2017, "Proximal Policy Optimization Algorithms"), with asymmetric clip bounds
 * (DAPO's "clip-higher", Yu et al. 2025): ratio = exp(logp − logp_old), per-token loss
 * −min(ratio·A, clip(ratio, 1 − clipLow, 1 + clipHigh)·A).
 * KL penalty: Schulman's k3 estimator of KL(π‖π_ref), exp(ref − logp) − (ref − logp) − 1, unbiased and ≥ 0.
 */
import * as tf from '@tensorflow/tfjs';

export interface PpoTokenTerms {
  /** Per-token policy-gradient loss [N]. */
  loss: tf.Tensor1D;
  /** 1 where the clipped branch was the smaller (gradient zero), else 0 [N]. */
  clipped: tf.Tensor1D;
}

export function ppoClipLoss(logp: tf.Tensor1D, oldLogp: tf.Tensor1D, advantages: tf.Tensor1D, clipLow: number, clipHigh: number): PpoTokenTerms {
  const ratio = tf.exp(tf.sub(logp, oldLogp)); // [N]
  const unclipped = tf.mul(ratio, advantages); // [N]
  const clippedObjective = tf.mul(tf.clipByValue(ratio, 1 - clipLow, 1 + clipHigh), advantages); // [N]
  return {
    loss: tf.neg(tf.minimum(unclipped, clippedObjective)) as tf.Tensor1D,
    clipped: tf.cast(tf.less(clippedObjective, unclipped), 'float32') as tf.Tensor1D,
  };
}

/** k3 estimate of KL(π‖π_ref) per token [N]. */
export function k3Kl(logp: tf.Tensor1D, refLogp: tf.Tensor1D): tf.Tensor1D {
  const d = tf.sub(refLogp, logp); // log(π_ref/π)
  return tf.sub(tf.sub(tf.exp(d), d), 1) as tf.Tensor1D;
}

/** Negative log-likelihood per token [N] (SFT). */
export function nllLoss(logp: tf.Tensor1D): tf.Tensor1D {
  return tf.neg(logp) as tf.Tensor1D;
}
