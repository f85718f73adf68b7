/**
 * RMSNorm fused into the product that reads it: y = (x · rsqrt(mean(x²) + eps) ⊙ w_norm) · W in one kernel
 * (fused-matmul.ts), so the normalised rows are never written. A pre-norm block normalises its input once and
 * projects it several times (q, k, v in training; qkv fused for decoding): `PendingNorm` carries the rows and the
 * norm to each projection, which runs fused where fusedKernelPays says so and otherwise normalises once (our RMSNorm
 * kernel on webgpu, tf's composition elsewhere: other backends compute exactly what they did before).
 *
 * The gradient is tf ops, unfused (recomputing the normalised rows, then the product's and RMSNorm's analytic
 * gradients); calibration (fused-calibration.ts) times training's forward with this backward against the unfused pair.
 */
import * as tf from '@tensorflow/tfjs';
import { fusedKernelPays, NORM_MATMUL_KERNEL } from './fused-matmul.ts';
import { rmsNorm } from './rms-norm.ts';

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** r = rsqrt(mean(x²) + eps) [..., 1] and x̂ = x · r, the terms of RMSNorm's gradient. */
export function normTerms(x: tf.Tensor, eps: number): { r: tf.Tensor; xHat: tf.Tensor } {
  const r = tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps)); // [..., 1]
  return { r, xHat: tf.mul(x, r) };
}

/** dx and dw of y = x̂ ⊙ w from dy (as rms-norm.ts's gradient), for rows x [N, D]. */
export function normBackward(dy: tf.Tensor, r: tf.Tensor, xHat: tf.Tensor, w: tf.Tensor): [tf.Tensor, tf.Tensor] {
  const dxHat = tf.mul(dy, w);
  const dx = tf.mul(r, tf.sub(dxHat, tf.mul(xHat, tf.mean(tf.mul(dxHat, xHat), -1, true))));
  const dw = tf.reshape(tf.sum(tf.mul(dy, xHat), 0), w.shape);
  return [dx, dw];
}

/** rmsNorm(x, normWeight, eps) · w, x [..., D], w [D, O] → [..., O], in one kernel forward (webgpu only). */
export function normMatmul<T extends tf.Tensor>(x: T, normWeight: tf.Tensor1D, eps: number, w: tf.Tensor2D): T {
  const [d, n] = w.shape;
  const rows = tf.reshape(x, [-1, d]); // [N, D]
  const f = tf.customGrad(((xIn: tf.Tensor, nwIn: tf.Tensor, wIn: tf.Tensor, save: tf.GradSaveFunc) => {
    save([xIn, nwIn, wIn]);
    return {
      value: tf.engine().runKernel(NORM_MATMUL_KERNEL, { x: xIn, normWeight: nwIn, b: wIn }, { eps, n, gateOffset: 0, upOffset: 0 }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, nws, ws] = saved as tf.Tensor2D[];
        const { r, xHat } = normTerms(xs, eps);
        const xn = tf.mul(xHat, nws) as tf.Tensor2D; // [N, D], recomputed
        const dxn = tf.matMul(dy as tf.Tensor2D, ws, false, true); // [N, D]
        const dw = tf.matMul(xn, dy as tf.Tensor2D, true, false); // [D, O]
        const [dx, dnw] = normBackward(dxn, r, xHat, nws);
        return [dx, dnw, dw];
      },
    };
  }) as unknown as CustomGradientFunc);
  return tf.reshape(f(rows, normWeight, w), [...x.shape.slice(0, -1), n]) as T; // [..., O]
}

/**
 * Rows x [N, D] with an RMSNorm still to apply: `project` multiplies the normalised rows by a weight, fused where
 * that pays, and `normed` gives them (computed once, for the products that do not fuse and for other readers).
 */
export class PendingNorm {
  private normedRows: tf.Tensor2D | null = null;
  constructor(
    readonly x: tf.Tensor2D,
    readonly weight: tf.Tensor1D,
    readonly eps: number,
  ) {}

  normed(): tf.Tensor2D {
    this.normedRows ??= rmsNorm(this.x, this.weight, this.eps);
    return this.normedRows;
  }

  /** normed() · w; `unfused` is the caller's product (model.ts's linear) for where the fused kernel does not run. */
  project(w: tf.Tensor2D, unfused: (x: tf.Tensor2D, w: tf.Tensor2D) => tf.Tensor2D): tf.Tensor2D {
    if (fusedKernelPays('normMatmul', this.x.shape[0])) return normMatmul(this.x, this.weight, this.eps, w);
    return unfused(this.normed(), w);
  }
}
