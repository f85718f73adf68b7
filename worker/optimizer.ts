/**
 * AdamW (Loshchilov & Hutter 2019: Adam with weight decay decoupled from the gradient), global-norm gradient
 * clipping, and the learning-rate schedule.
 */
import * as tf from '@tensorflow/tfjs';
import type { LrSchedule } from './common/engine.ts';

export interface AdamWOptions {
  beta1: number;
  beta2: number;
  eps: number;
}

/** β2 = 0.95 rather than Adam's 0.999: the usual choice for LLM training, it reacts faster to gradient changes. */
export const DEFAULT_ADAMW: AdamWOptions = { beta1: 0.9, beta2: 0.95, eps: 1e-8 };

/**
 * One update per parameter. (A single flat update over all parameters would be fewer ops, but splitting a flat
 * vector back into parameters is pathologically slow on the wasm backend: seconds for a few million floats.)
 */
export class AdamW {
  private readonly m: tf.Variable[];
  private readonly v: tf.Variable[];
  private t = 0;

  constructor(
    readonly params: tf.Variable[],
    private readonly opts: AdamWOptions = DEFAULT_ADAMW,
  ) {
    // tidy releases the zeros tensors; each variable keeps their data (a variable made from a tensor shares it).
    this.m = params.map((p) => tf.tidy(() => tf.variable(tf.zerosLike(p), false)));
    this.v = params.map((p) => tf.tidy(() => tf.variable(tf.zerosLike(p), false)));
  }

  get stepCount(): number {
    return this.t;
  }

  /**
   * p ← p − lr·(m̂ / (√v̂ + eps) + wd·p), with g scaled by `gradScale` (clipping). Weight decay applies to matrices
   * only: norms and biases are left alone, as is common practice.
   */
  step(grads: tf.Tensor[], lr: number, weightDecay: number, gradScale: number | tf.Scalar = 1): void {
    this.t += 1;
    const { beta1, beta2, eps } = this.opts;
    const c1 = 1 / (1 - Math.pow(beta1, this.t));
    const c2 = 1 / (1 - Math.pow(beta2, this.t));
    tf.tidy(() => {
      for (let i = 0; i < this.params.length; i++) {
        const p = this.params[i];
        const g = gradScale === 1 ? grads[i] : tf.mul(grads[i], gradScale);
        const m = tf.add(tf.mul(this.m[i], beta1), tf.mul(g, 1 - beta1));
        const v = tf.add(tf.mul(this.v[i], beta2), tf.mul(tf.square(g), 1 - beta2));
        this.m[i].assign(m);
        this.v[i].assign(v);
        let update = tf.div(tf.mul(m, c1), tf.add(tf.sqrt(tf.mul(v, c2)), eps));
        if (weightDecay > 0 && p.rank >= 2) update = tf.add(update, tf.mul(p, weightDecay));
        p.assign(tf.sub(p, tf.mul(update, lr)));
      }
    });
  }

  /** The moments (copies, in the variables' order) and the step count: everything the next step depends on. */
  async exportState(): Promise<{ step: number; m: Float32Array[]; v: Float32Array[] }> {
    const read = (ts: tf.Variable[]) => Promise.all(ts.map(async (t) => new Float32Array(await t.data())));
    return { step: this.t, m: await read(this.m), v: await read(this.v) };
  }

  /** Restores what exportState gave; every moment must have its variable's size (checked before anything changes). */
  importState(state: { step: number; m: readonly Float32Array[]; v: readonly Float32Array[] }): void {
    if (!Number.isInteger(state.step) || state.step < 0) throw new OptimizerStateError(`step must be a non-negative integer, got ${state.step}`);
    if (state.m.length !== this.params.length || state.v.length !== this.params.length) {
      throw new OptimizerStateError(`expected moments for ${this.params.length} variables, got ${state.m.length} and ${state.v.length}`);
    }
    this.params.forEach((p, i) => {
      if (state.m[i].length !== p.size || state.v[i].length !== p.size) throw new OptimizerStateError(`variable ${i}: moments of ${state.m[i].length}/${state.v[i].length} values for ${p.size}`);
    });
    // tidy frees the uploaded tensors once assigned (assign keeps its own reference to the data).
    tf.tidy(() => {
      this.params.forEach((p, i) => {
        this.m[i].assign(tf.tensor(state.m[i], p.shape));
        this.v[i].assign(tf.tensor(state.v[i], p.shape));
      });
    });
    this.t = state.step;
  }

  dispose(): void {
    for (const t of [...this.m, ...this.v]) t.dispose();
  }
}

/** Optimizer state that does not fit the variables it is given to (another model, another LoRA config). */
export class OptimizerStateError extends Error {
  override name = 'OptimizerStateError';
}

/** Σ‖g‖² over all gradients, left on the device. */
export function globalNormSquared(grads: tf.Tensor[]): tf.Scalar {
  if (grads.length === 0) return tf.scalar(0);
  return tf.tidy(() => tf.addN(grads.map((g) => tf.sum(tf.square(g)))) as tf.Scalar);
}

/** √(Σ‖g‖²) over all gradients (reads synchronously: wasm/cpu). */
export function globalNorm(grads: tf.Tensor[]): number {
  const sq = globalNormSquared(grads);
  const v = sq.dataSync()[0];
  sq.dispose();
  return Math.sqrt(v);
}

/**
 * clipScale computed on the device from Σ‖g‖², for backends that read asynchronously: the optimizer step needs
 * no read back in the middle of the training step.
 */
export function clipScaleOnDevice(normSquared: tf.Scalar, maxNorm: number): tf.Scalar {
  if (!(maxNorm > 0)) return tf.scalar(1);
  return tf.tidy(() => {
    const norm = tf.sqrt(normSquared);
    const clip = tf.logicalAnd(tf.isFinite(norm), tf.greater(norm, maxNorm));
    return tf.where(clip, tf.div(maxNorm, tf.add(norm, 1e-6)), tf.onesLike(norm)) as tf.Scalar;
  });
}

/** Factor that brings the global norm down to `maxNorm` (1 when already below, or clipping is off). */
export function clipScale(norm: number, maxNorm: number): number {
  if (!(maxNorm > 0) || !Number.isFinite(norm) || norm <= maxNorm) return 1;
  return maxNorm / (norm + 1e-6);
}


/** Learning rate for optimizer step `step` (0-based). Cosine decays from the peak to peak·minRatio at totalSteps. */
export function learningRateAt(peak: number, step: number, schedule: LrSchedule): number {
  if (schedule.kind === 'constant') return peak;
  const { warmupSteps, totalSteps, minRatio } = schedule;
  if (step < warmupSteps) return (peak * (step + 1)) / warmupSteps;
  const progress = Math.min(1, (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps));
  return peak * (minRatio + (1 - minRatio) * 0.5 * (1 + Math.cos(Math.PI * progress)));
}
