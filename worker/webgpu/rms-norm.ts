/**
 * RMSNorm (Zhang & Sennrich 2019) as one webgpu kernel: y = x / sqrt(mean(x²) + eps) · w over the last axis.
 * tf's composition (worker/model.ts rmsNorm) dispatches five kernels (square, mean, add, rsqrt, two muls) and
 * writes four intermediate tensors; here one workgroup reads a row, reduces its squares, and writes y.
 *
 * The reduction uses subgroup sums where the device has them (`subgroupAdd`, then one partial per subgroup in
 * workgroup memory: one barrier) and a shared-memory tree otherwise (log₂ of the workgroup size barriers); both are
 * tested. The gradient is tf's composition of the analytic formula (it runs once per training step per norm, beside
 * matmuls that cost far more).
 */
import * as tf from '@tensorflow/tfjs';
import { featuresOf } from './device.ts';
import { asWebGpu, dispatch, GRID_BUILTINS, gridFor, ourKernelRuns } from './gpu.ts';

export const RMS_NORM_KERNEL = 'AgentJetRmsNorm';

/** Threads per row: a power of two (the tree reduction halves it); 128 covers hidden sizes 896–8192 in a few strides. */
const RMS_WORKGROUP = 128;

export type RmsReduction = 'subgroups' | 'workgroup';

let preferred: RmsReduction = 'subgroups';

/** Prefer subgroup or workgroup-memory reduction ('subgroups' runs only where the device has them). */
export function setRmsNormReduction(r: RmsReduction): void {
  preferred = r;
}

function wgsl(subgroups: boolean): string {
  const reduce = subgroups
    ? `let sgSum = subgroupAdd(s);
  if (lane == 0u) { part[sg] = sgSum; }
  workgroupBarrier();
  var total = 0.0;
  for (var j = 0u; j < nsg; j++) { total += part[j]; }`
    : `part[t] = s;
  workgroupBarrier();
  for (var stride = ${RMS_WORKGROUP / 2}; stride > 0; stride >>= 1u) {
    if (t < stride) { part[t] += part[t + stride]; }
    workgroupBarrier();
  }
  let total = part[0];`;
  const sgBuiltins = subgroups ? ', @builtin(subgroup_id) sg : u32, @builtin(num_subgroups) nsg : u32, @builtin(subgroup_invocation_id) lane : u32' : '';
  return `${subgroups ? 'enable subgroups;\n' : ''}struct U { rows : i32, d : i32, eps : f32, pad0 : i32, };
@group(0) @binding(0) var<storage, read_write> y : array<f32>;
@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(2) var<storage, read> w : array<f32>;
@group(0) @binding(3) var<uniform> u : U;
var<workgroup> part : array<f32, ${RMS_WORKGROUP}>;

@compute @workgroup_size(${RMS_WORKGROUP}, 1, 1)
fn main(${GRID_BUILTINS}${sgBuiltins}) {
  let row = i32(wid.y * nwg.x + wid.x);
  if (row >= u.rows) { return; }
  let t = i32(li);
  let off = row * u.d;
  var s = 0.0;
  for (var i = t; i < u.d; i += ${RMS_WORKGROUP}) { let v = x[off + i]; s = fma(v, v, s); }
  ${reduce}
  let inv = inverseSqrt(total / f32(u.d) + u.eps);
  for (var i = t; i < u.d; i += ${RMS_WORKGROUP}) { y[off + i] = x[off + i] * inv * w[i]; }
}`;
}

/** Register the webgpu kernel: inputs {x [..., D], w [D]}, attrs {eps}. */
export function registerRmsNorm(): void {
  tf.registerKernel({
    kernelName: RMS_NORM_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const x = inputs.x as tf.TensorInfo;
      const w = inputs.w as tf.TensorInfo;
      const gpu = asWebGpu(backend);
      const d = x.shape[x.shape.length - 1];
      const rows = tf.util.sizeFromShape(x.shape) / d;
      const subgroups = preferred === 'subgroups' && featuresOf(gpu.device).subgroups;
      return dispatch(gpu, {
        key: `rms-norm-${subgroups ? 'sg' : 'wg'}`,
        wgsl: () => wgsl(subgroups),
        name: 'RmsNorm',
        inputs: [x, w],
        output: { shape: x.shape },
        uniforms: [{ i32: rows }, { i32: d }, { f32: (attrs as { eps: number }).eps }],
        workgroups: gridFor(rows),
      });
    },
  });
}

/** tf's composition, the reference and the path on other backends (same as worker/model.ts rmsNorm). */
export function rmsNormReference<T extends tf.Tensor>(x: T, w: tf.Tensor, eps: number): T {
  const ms = tf.mean(tf.square(x), -1, true); // [..., 1]
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(ms, eps))), w) as T;
}

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** r = rsqrt(mean(x²) + eps) [..., 1] and x̂ = x · r: the terms of RMSNorm's gradient, recomputed from x. */
export function rmsNormTerms(x: tf.Tensor, eps: number): { r: tf.Tensor; xHat: tf.Tensor } {
  const r = tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), eps)); // [..., 1]
  return { r, xHat: tf.mul(x, r) };
}

/** dx and dw of y = x̂ ⊙ w from dy, x [..., D] (also the fused norm·matmul's, fused-norm-matmul.ts). */
export function rmsNormBackward(dy: tf.Tensor, r: tf.Tensor, xHat: tf.Tensor, w: tf.Tensor): [tf.Tensor, tf.Tensor] {
  const d = xHat.shape[xHat.shape.length - 1];
  const dxHat = tf.mul(dy, w);
  const dx = tf.mul(r, tf.sub(dxHat, tf.mul(xHat, tf.mean(tf.mul(dxHat, xHat), -1, true))));
  const dw = tf.reshape(tf.sum(tf.reshape(tf.mul(dy, xHat), [-1, d]), 0), w.shape);
  return [dx, dw];
}

/** RMSNorm with its gradient; one kernel forward on webgpu, tf's composition elsewhere. */
export function rmsNorm<T extends tf.Tensor>(x: T, w: tf.Tensor, eps: number): T {
  if (!ourKernelRuns(RMS_NORM_KERNEL)) return rmsNormReference(x, w, eps);
  const f = tf.customGrad(((xIn: tf.Tensor, wIn: tf.Tensor, save: tf.GradSaveFunc) => {
    save([xIn, wIn]);
    return {
      value: tf.engine().runKernel(RMS_NORM_KERNEL, { x: xIn, w: wIn }, { eps }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, ws] = saved;
        const { r, xHat } = rmsNormTerms(xs, eps);
        return rmsNormBackward(dy, r, xHat, ws);
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(x, w) as T;
}
