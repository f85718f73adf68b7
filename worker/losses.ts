/**
 * Per-token losses for RL and supervised fine-tuning. Inputs are aligned per predicted token ([N]); masking and
 * normalisation happen in train.ts.
 *
 * PPO-clip (Schulman et al. 2017, "Proximal Policy Optimization Algorithms"), with asymmetric clip bounds
 * (DAPO's "clip-higher", Yu et al. 2025): ratio = exp(logp − logp_old), per-token loss
 * −min(ratio·A, clip(ratio, 1 − clipLow, 1 + clipHigh)·A).
 * KL penalty: Schulman's k3 estimator of KL(π‖π_ref), exp(ref − logp) − (ref − logp) − 1, unbiased and ≥ 0.
 *
 * Off-policy corrections, for tokens sampled by older weights than the ones being updated (asynchronous training):
 * - Decoupled PPO (Hilton et al. 2022, "Batch size-invariance for policy optimization"; AReaL, Fu et al. 2025): the
 *   trust region is taken around the proximal policy — the weights before this step's first update, their logprobs
 *   recomputed (a step of several updates, TrainOptions miniBatches/epochs, holds a copy of them) —
 *   not around the behaviour policy that sampled the token: per-token loss
 *   −w·min(r·A, clip(r, 1 − clipLow, 1 + clipHigh)·A) with r = exp(logp − logp_prox) and the constant weight
 *   w = min(exp(logp_prox − logp_behav), cap). With fresh episodes (prox = behav) it is PPO.
 * - Truncated importance sampling (IMPALA's truncated ρ̄, Espeholt et al. 2018): the policy gradient weighted by the
 *   behaviour ratio, truncated: per-token loss −sg(min(ρ, cap))·A·logp with ρ = exp(logp − logp_behav); its gradient
 *   below the cap is PPO's unclipped one, above it the cap times −A·∇logp. No proximal forward is needed.
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

/** Decoupled PPO per token [N]: PPO-clip around the proximal logprobs, weighted by the capped prox/behaviour ratio. */
export function decoupledPpoLoss(logp: tf.Tensor1D, proxLogp: tf.Tensor1D, behaviourLogp: tf.Tensor1D, advantages: tf.Tensor1D, clipLow: number, clipHigh: number, cap: number): PpoTokenTerms {
  const ppo = ppoClipLoss(logp, proxLogp, advantages, clipLow, clipHigh);
  const weight = tf.minimum(tf.exp(tf.sub(proxLogp, behaviourLogp)), cap); // [N], no gradient: both inputs are data
  return { loss: tf.mul(ppo.loss, weight) as tf.Tensor1D, clipped: ppo.clipped };
}

/** tf.customGrad's function type (not exported by @tensorflow/tfjs). */
type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** x as a constant of the loss: the same values, no gradient through it (tfjs has no stop-gradient op). */
function withoutGradient<T extends tf.Tensor>(x: T): T {
  const f = tf.customGrad(((input: tf.Tensor) => ({ value: tf.clone(input), gradFunc: (dy: tf.Tensor) => tf.zerosLike(dy) })) as unknown as CustomGradientFunc);
  return f(x) as T;
}

/** Truncated-IS policy gradient per token [N]; `clipped` marks the tokens whose weight the cap cut. */
export function truncatedIsLoss(logp: tf.Tensor1D, behaviourLogp: tf.Tensor1D, advantages: tf.Tensor1D, cap: number): PpoTokenTerms {
  const ratio = tf.exp(tf.sub(withoutGradient(logp), behaviourLogp)); // [N], a constant weight
  return {
    loss: tf.neg(tf.mul(tf.mul(tf.minimum(ratio, cap), advantages), logp)) as tf.Tensor1D,
    clipped: tf.cast(tf.greater(ratio, cap), 'float32') as tf.Tensor1D,
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
