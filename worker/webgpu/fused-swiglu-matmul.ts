/**
 * SwiGLU fused into its gate/up product: silu(x·W_gate) · (x·W_up) from the two accumulators of one kernel
 * (fused-matmul.ts), so gate and up [N, I] (I the model's widest activation) are never written. Training's weights
 * are separate gate and up [D, I]; decoding's are one gate/up weight [D, 2·I] (model.ts DecodeLayer.gateUp), read as
 * two column ranges. The MLP's input is a pre-norm block's normalised rows, so the kernel takes the RMSNorm as well
 * when handed a PendingNorm: norm, both products and the gate in one dispatch.
 *
 * The gradient is tf ops, unfused: it recomputes the normalised rows and gate and up (two products, or one on the
 * gate/up weight), then SwiGLU's, the products' and RMSNorm's analytic gradients. That recomputation is why training
 * is measured separately from inference (fused-calibration.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { fusedKernelPays, SWIGLU_MATMUL_KERNEL } from './fused-matmul.ts';
import { PendingNorm } from './fused-norm-matmul.ts';
import { rmsNormBackward, rmsNormTerms } from './rms-norm.ts';
import { swiglu, swigluBackward, swigluHalves, swigluHalvesBackward } from './swiglu.ts';

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** Separate gate and up weights [D, I], or one [D, 2·I] holding gate's columns then up's. */
export type GatedWeights = { gate: tf.Tensor2D; up: tf.Tensor2D } | { gateUp: tf.Tensor2D };

export class GatedWeightsShapeError extends Error {
  override name = 'GatedWeightsShapeError';
}

/**
 * silu(x'·W_gate) · (x'·W_up), x [..., D] → [..., I], x' = rmsNorm(x, norm.weight, norm.eps) with a norm, else x; one
 * kernel forward (webgpu only).
 */
export function swigluMatmul<T extends tf.Tensor>(x: T, weights: GatedWeights, norm: { weight: tf.Tensor1D; eps: number } | null): T {
  const joint = 'gateUp' in weights;
  const w0 = joint ? weights.gateUp : weights.gate;
  const [d, width] = w0.shape;
  const inter = joint ? width / 2 : width;
  if (joint ? width % 2 !== 0 : !tf.util.arraysEqual(weights.up.shape, w0.shape)) throw new GatedWeightsShapeError(`gate/up weights of shapes ${joint ? `[${width}] (odd)` : `[${w0.shape}] and [${weights.up.shape}]`}`);
  const eps = norm?.eps ?? 0;
  const rows = tf.reshape(x, [-1, d]); // [N, D]
  const inputs: tf.Tensor[] = [rows, ...(norm ? [norm.weight] : []), ...(joint ? [weights.gateUp] : [weights.gate, weights.up])];
  const f = tf.customGrad(((...args: unknown[]) => {
    const save = args.pop() as tf.GradSaveFunc;
    const ins = args as tf.Tensor[];
    save(ins);
    const named = { x: ins[0], ...(norm ? { normWeight: ins[1] } : {}), b: ins[norm ? 2 : 1], up: ins[ins.length - 1] };
    return {
      value: tf.engine().runKernel(SWIGLU_MATMUL_KERNEL, named, { eps, n: inter, gateOffset: 0, upOffset: joint ? inter : 0 }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const xs = saved[0] as tf.Tensor2D;
        const nw = norm ? saved[1] : null;
        const ws = saved.slice(norm ? 2 : 1) as tf.Tensor2D[];
        const terms = nw ? rmsNormTerms(xs, eps) : null;
        const xn = (terms && nw ? tf.mul(terms.xHat, nw) : xs) as tf.Tensor2D; // [N, D], recomputed
        let dxn: tf.Tensor;
        let dws: tf.Tensor[];
        if (joint) {
          const dgu = swigluHalvesBackward(dy, tf.matMul(xn, ws[0])) as tf.Tensor2D; // [N, 2·I]
          dxn = tf.matMul(dgu, ws[0], false, true);
          dws = [tf.matMul(xn, dgu, true, false)];
        } else {
          const [dg, du] = swigluBackward(dy, tf.matMul(xn, ws[0]), tf.matMul(xn, ws[1])) as tf.Tensor2D[];
          dxn = tf.add(tf.matMul(dg, ws[0], false, true), tf.matMul(du, ws[1], false, true));
          dws = [tf.matMul(xn, dg, true, false), tf.matMul(xn, du, true, false)];
        }
        if (!terms || !nw) return [dxn, ...dws];
        const [dx, dnw] = rmsNormBackward(dxn, terms.r, terms.xHat, nw);
        return [dx, dnw, ...dws];
      },
    };
  }) as unknown as CustomGradientFunc);
  return tf.reshape(f(...inputs), [...x.shape.slice(0, -1), inter]) as T; // [..., I]
}

/**
 * silu(gate) · up [N, I] of the MLP's input `x` (normalised rows, or a PendingNorm whose norm the kernel then
 * applies): one kernel where that pays; elsewhere the normalised rows times the weights by `product` (the caller's:
 * model.ts's linear), once for a gate/up weight, and SwiGLU (one kernel on webgpu, reading a gate/up product's
 * halves in place; tf's composition elsewhere).
 */
export function gatedUnits(x: tf.Tensor2D | PendingNorm, weights: GatedWeights, product: (x: tf.Tensor2D, w: tf.Tensor2D) => tf.Tensor2D): tf.Tensor2D {
  const rows = x instanceof PendingNorm ? x.x : x;
  if (fusedKernelPays('swigluMatmul', rows.shape[0])) return swigluMatmul(rows, weights, x instanceof PendingNorm ? { weight: x.weight, eps: x.eps } : null);
  const xn = x instanceof PendingNorm ? x.normed() : x;
  if (!('gateUp' in weights)) return swiglu(product(xn, weights.gate), product(xn, weights.up));
  return swigluHalves(product(xn, weights.gateUp)); // [N, 2·I] → [N, I]
}
