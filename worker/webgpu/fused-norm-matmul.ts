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
import { matMulPlus } from './matmul-add.ts';
import { rmsNorm, rmsNormBackward, rmsNormTerms } from './rms-norm.ts';

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/**
 * rmsNorm(x, normWeight, eps) · w (+ bias [O]), x [..., D], w [D, O] → [..., O], in one kernel forward (webgpu only).
 */
export function normMatmul<T extends tf.Tensor>(x: T, normWeight: tf.Tensor1D, eps: number, w: tf.Tensor2D, bias: tf.Tensor1D | null = null): T {
  const [d, n] = w.shape;
  const rows = tf.reshape(x, [-1, d]); // [N, D]
  const f = tf.customGrad(((xIn: tf.Tensor, nwIn: tf.Tensor, wIn: tf.Tensor, ...rest: unknown[]) => {
    const save = rest.pop() as tf.GradSaveFunc;
    const biasIn = rest[0] as tf.Tensor | undefined;
    save([xIn, nwIn, wIn]);
    return {
      value: tf.engine().runKernel(NORM_MATMUL_KERNEL, { x: xIn, normWeight: nwIn, b: wIn, ...(biasIn ? { bias: biasIn } : {}) }, { eps, n, gateOffset: 0, upOffset: 0 }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, nws, ws] = saved as tf.Tensor2D[];
        const { r, xHat } = rmsNormTerms(xs, eps);
        const xn = tf.mul(xHat, nws) as tf.Tensor2D; // [N, D], recomputed
        const dxn = tf.matMul(dy as tf.Tensor2D, ws, false, true); // [N, D]
        const dw = tf.matMul(xn, dy as tf.Tensor2D, true, false); // [D, O]
        const [dx, dnw] = rmsNormBackward(dxn, r, xHat, nws);
        return biasIn ? [dx, dnw, dw, tf.sum(dy, 0)] : [dx, dnw, dw];
      },
    };
  }) as unknown as CustomGradientFunc);
  const y = bias ? f(rows, normWeight, w, bias) : f(rows, normWeight, w);
  return tf.reshape(y, [...x.shape.slice(0, -1), n]) as T; // [..., O]
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

  /**
   * normed() · w; `unfused` is the caller's product (model.ts's linear) for where the fused kernel does not run. A
   * bias is added in the product's stores (the fused kernel's or matmul-add.ts's), not by a dispatch of its own.
   */
  project(w: tf.Tensor2D, unfused: (x: tf.Tensor2D, w: tf.Tensor2D) => tf.Tensor2D, bias: tf.Tensor1D | null = null): tf.Tensor2D {
    if (fusedKernelPays('normMatmul', this.x.shape[0])) return normMatmul(this.x, this.weight, this.eps, w, bias);
    return bias ? matMulPlus(this.normed(), w, bias) : unfused(this.normed(), w);
  }
}
