/**
 * RoPE, Hugging Face's "rotate half" convention (dims i and i + hd/2 rotate together), as one webgpu kernel:
 * y = x·cos + rotate_half(x)·sin with rotate_half(x) = concat(−x₂, x₁) and cos/sin tables [T, hd] (worker/model.ts
 * ropeTables). tf's composition (worker/model.ts applyRope) is a matmul by a ±1 matrix, two broadcasts, two muls
 * and an add; here each output element reads its pair and its two table entries.
 *
 * The gradient is the adjoint rotation, the same kernel with `inverse` set:
 * dx_i = dy_i·cos_i + dy_{i+h}·sin_{i+h}, dx_{i+h} = dy_{i+h}·cos_{i+h} − dy_i·sin_i (h = hd/2).
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, dispatch, ELEMENTWISE_WORKGROUP, FLAT_INDEX, GRID_BUILTINS, gridFor, ourKernelRuns } from './gpu.ts';

export const ROPE_KERNEL = 'AgentJetRope';

export class RopeShapeError extends Error {
  override name = 'RopeShapeError';
}

/**
 * With `scaled`, each element read is first multiplied by scale[head, d] (scale [heads, 1] or [heads, hd]): a
 * decode step's query scaling or q/k norm weights, applied where they are read instead of by a pass of their own.
 * The input's rows may hold more heads than are rotated (u.srcHeads ≥ u.heads: a decode step's q, k and v heads,
 * of which q and k are rotated), so that no slice is copied first.
 */
function wgsl(scaled: boolean): string {
  const at = (index: string, d: string) => (scaled ? `x[${index}] * scale[head * u.scaleWidth + select(0, ${d}, u.scaleWidth > 1)]` : `x[${index}]`);
  return `struct U { total : i32, hd : i32, heads : i32, t : i32, inverse : i32, srcHeads : i32, scaleWidth : i32, pad0 : i32, };
@group(0) @binding(0) var<storage, read_write> y : array<f32>;
@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(2) var<storage, read> cosT : array<f32>;
@group(0) @binding(3) var<storage, read> sinT : array<f32>;
${scaled ? '@group(0) @binding(4) var<storage, read> scale : array<f32>;\n' : ''}@group(0) @binding(${scaled ? 5 : 4}) var<uniform> u : U;

@compute @workgroup_size(${ELEMENTWISE_WORKGROUP}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let i = ${FLAT_INDEX};
  if (i >= u.total) { return; }
  let half = u.hd / 2;
  let d = i % u.hd;
  let rowWidth = u.hd * u.heads;
  let pos = (i / rowWidth) % u.t;
  let head = (i / u.hd) % u.heads;
  let src = (i / rowWidth) * u.hd * u.srcHeads + i % rowWidth;
  let row = pos * u.hd;
  let first = d < half;
  let dp = select(d - half, d + half, first);
  let p = src + dp - d;  // the pair's element
  // forward: the pair enters with −sin_d (first half) or +sin_d; inverse: with +sin_dp or −sin_dp.
  let s = select(select(sinT[row + d], -sinT[row + d], first), select(-sinT[row + dp], sinT[row + dp], first), u.inverse != 0);
  y[i] = ${at('src', 'd')} * cosT[row + d] + ${at('p', 'dp')} * s;
}`;
}

/**
 * Register the webgpu kernel: inputs {x [..., T, srcHeads, hd], cos [T, hd], sin [T, hd], scale?}, attrs {inverse,
 * heads?}: the first `heads` (all by default) of x's heads, rotated, [..., T, heads, hd].
 */
export function registerRope(): void {
  tf.registerKernel({
    kernelName: ROPE_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const x = inputs.x as tf.TensorInfo;
      const scale = inputs.scale as tf.TensorInfo | undefined;
      const [t, hd] = (inputs.cos as tf.TensorInfo).shape;
      const srcHeads = x.shape[x.shape.length - 2];
      const { inverse, heads = srcHeads } = attrs as { inverse: boolean; heads?: number };
      const shape = [...x.shape.slice(0, -2), heads, hd];
      const total = tf.util.sizeFromShape(shape);
      return dispatch(asWebGpu(backend), {
        key: scale ? 'rope-scaled' : 'rope',
        wgsl: () => wgsl(scale !== undefined),
        name: 'Rope',
        inputs: [x, inputs.cos as tf.TensorInfo, inputs.sin as tf.TensorInfo, ...(scale ? [scale] : [])],
        output: { shape },
        uniforms: [{ i32: total }, { i32: hd }, { i32: heads }, { i32: t }, { i32: inverse ? 1 : 0 }, { i32: srcHeads }, { i32: scale ? scale.shape[1] : 0 }],
        workgroups: gridFor(Math.ceil(total / ELEMENTWISE_WORKGROUP)),
      });
    },
  });
}

/** rotate_half(x) for x [..., hd]: concat(−x₂, x₁). */
function rotateHalf(x: tf.Tensor): tf.Tensor {
  const hd = x.shape[x.shape.length - 1];
  const [x1, x2] = tf.split(x, [hd / 2, hd / 2], -1);
  return tf.concat([tf.neg(x2), x1], -1);
}

/** tf's composition, the reference and the path on other backends: x [..., T, heads, hd], cos/sin [T, hd]. */
export function applyRopeReference<T extends tf.Tensor>(x: T, cos: tf.Tensor, sin: tf.Tensor): T {
  const [t, hd] = cos.shape;
  const c = tf.reshape(cos, [t, 1, hd]);
  const s = tf.reshape(sin, [t, 1, hd]);
  return tf.add(tf.mul(x, c), tf.mul(rotateHalf(x), s)) as T;
}

function checkShapes(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor): void {
  const r = x.rank;
  const ok = r >= 3 && cos.rank === 2 && sin.rank === 2 && cos.shape.every((d, i) => d === sin.shape[i]) && cos.shape[0] === x.shape[r - 3] && cos.shape[1] === x.shape[r - 1] && x.shape[r - 1] % 2 === 0;
  if (!ok) throw new RopeShapeError(`RoPE wants x [..., T, heads, hd] (even hd) and cos/sin [T, hd]; got ${x.shape}, ${cos.shape}, ${sin.shape}`);
}

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** RoPE with its gradient (for x; the tables are constants): one kernel each way on webgpu. */
export function applyRope<T extends tf.Tensor>(x: T, cos: tf.Tensor, sin: tf.Tensor): T {
  checkShapes(x, cos, sin);
  if (!ourKernelRuns(ROPE_KERNEL)) return applyRopeReference(x, cos, sin);
  const f = tf.customGrad(((xIn: tf.Tensor, save: tf.GradSaveFunc) => {
    // Saved, not closed over: tables made inside the differentiated function (the model's forward) are disposed by
    // its tidy before the backward pass runs; saved tensors are kept until then.
    save([cos, sin]);
    return {
      value: tf.engine().runKernel(ROPE_KERNEL, { x: xIn, cos, sin }, { inverse: false }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => [tf.engine().runKernel(ROPE_KERNEL, { x: dy, cos: saved[0], sin: saved[1] }, { inverse: true }) as tf.Tensor],
    };
  }) as unknown as CustomGradientFunc);
  return f(x) as T;
}

/**
 * A decode step's queries and keys, rotated, from its projections: the first `heads` of x [n, srcHeads, hd] (a
 * position per row, cos/sin [n, hd]), each element times scale [heads, 1 | hd] as it is read — one kernel on webgpu,
 * which no slice or multiply precedes; elsewhere the slice, the product and applyRope. Decoding only: no gradient.
 */
export function ropeHeads(x: tf.Tensor3D, heads: number, scale: tf.Tensor2D, cos: tf.Tensor2D, sin: tf.Tensor2D): tf.Tensor3D {
  const [n, srcHeads, hd] = x.shape;
  const ok = heads >= 1 && heads <= srcHeads && scale.shape[0] === heads && (scale.shape[1] === 1 || scale.shape[1] === hd) && cos.shape[0] === n;
  if (!ok) throw new RopeShapeError(`ropeHeads wants x [n, ≥${heads}, hd], scale [${heads}, 1 or hd] and cos/sin [n, hd]; got ${x.shape}, ${scale.shape}, ${cos.shape}`);
  if (!ourKernelRuns(ROPE_KERNEL)) return applyRope(tf.mul(tf.slice(x, [0, 0, 0], [n, heads, hd]), scale) as tf.Tensor3D, cos, sin);
  return tf.engine().runKernel(ROPE_KERNEL, { x, cos, sin, scale }, { inverse: false, heads }) as tf.Tensor3D;
}
