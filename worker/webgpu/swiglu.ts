/**
 * SwiGLU's gate, silu(gate) · up (Shazeer 2020), as one webgpu kernel. tf's composition (worker/model.ts mlp) is
 * sigmoid, two muls and two intermediate [N, I] tensors, I being the widest activation of the model (4864 for
 * Qwen2.5-0.5B); here one pass reads gate and up once and writes the product.
 *
 * The gradient is tf's composition of ds/dg = σ(g)·(1 + g·(1 − σ(g))).
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, dispatch, ELEMENTWISE_WORKGROUP, FLAT_INDEX, GRID_BUILTINS, gridFor, ourKernelRuns } from './gpu.ts';

export const SWIGLU_KERNEL = 'AgentJetSwiglu';

export class SwigluShapeError extends Error {
  override name = 'SwigluShapeError';
}

/**
 * Two layouts: gate and up as two tensors of one shape, or ('halves') one tensor [N, 2·I] holding each row's gate
 * then its up (decoding's gate/up product), read in place instead of split into two copies first.
 */
function wgsl(halves: boolean): string {
  const [gateAt, upAt] = halves ? ['gate[i / u.width * 2 * u.width + i % u.width]', 'gate[i / u.width * 2 * u.width + u.width + i % u.width]'] : ['gate[i]', 'up[i]'];
  return `struct U { total : i32, width : i32, pad1 : i32, pad2 : i32, };
@group(0) @binding(0) var<storage, read_write> y : array<f32>;
@group(0) @binding(1) var<storage, read> gate : array<f32>;
${halves ? '' : '@group(0) @binding(2) var<storage, read> up : array<f32>;\n'}@group(0) @binding(${halves ? 2 : 3}) var<uniform> u : U;

@compute @workgroup_size(${ELEMENTWISE_WORKGROUP}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let i = ${FLAT_INDEX};
  if (i >= u.total) { return; }
  let g = ${gateAt};
  // 1 / (1 + e^−g): e^−g overflows to +inf for g < −88, giving 0, the limit.
  y[i] = g / (1.0 + exp(-g)) * ${upAt};
}`;
}

/** Register the webgpu kernel: inputs {gate, up} of one shape, or {gate} [N, 2·I] alone (its halves). */
export function registerSwiglu(): void {
  tf.registerKernel({
    kernelName: SWIGLU_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend }) => {
      const gate = inputs.gate as tf.TensorInfo;
      const halves = inputs.up === undefined;
      const width = halves ? gate.shape[gate.shape.length - 1] / 2 : gate.shape[gate.shape.length - 1];
      const shape = halves ? [...gate.shape.slice(0, -1), width] : gate.shape;
      const total = tf.util.sizeFromShape(shape);
      return dispatch(asWebGpu(backend), {
        key: halves ? 'swiglu-halves' : 'swiglu',
        wgsl: () => wgsl(halves),
        name: 'Swiglu',
        inputs: halves ? [gate] : [gate, inputs.up as tf.TensorInfo],
        output: { shape },
        uniforms: [{ i32: total }, { i32: width }],
        workgroups: gridFor(Math.ceil(total / ELEMENTWISE_WORKGROUP)),
      });
    },
  });
}

/** tf's composition, the reference and the path on other backends (as worker/model.ts mlp). */
export function swigluReference<T extends tf.Tensor>(gate: T, up: T): T {
  return tf.mul(tf.mul(gate, tf.sigmoid(gate)), up) as T;
}

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** silu(g) · u's gradient for g and u from dy (also the fused gate/up product's, fused-swiglu-matmul.ts). */
export function swigluBackward(dy: tf.Tensor, g: tf.Tensor, u: tf.Tensor): [tf.Tensor, tf.Tensor] {
  const s = tf.sigmoid(g);
  const silu = tf.mul(g, s);
  const dSilu = tf.mul(s, tf.add(1, tf.mul(g, tf.sub(1, s))));
  return [tf.mul(tf.mul(dy, u), dSilu), tf.mul(dy, silu)];
}

/** swigluBackward for gu [N, 2·I] holding each row's gate then its up: d(gu) [N, 2·I], the gate's half first. */
export function swigluHalvesBackward(dy: tf.Tensor, gu: tf.Tensor): tf.Tensor {
  const [g, u] = tf.split(gu, 2, -1);
  return tf.concat(swigluBackward(dy, g, u), -1);
}

/** silu(gate) · up with its gradient; one kernel forward on webgpu. */
export function swiglu<T extends tf.Tensor>(gate: T, up: T): T {
  if (!tf.util.arraysEqual(gate.shape, up.shape)) throw new SwigluShapeError(`gate ${gate.shape} and up ${up.shape} differ`);
  if (!ourKernelRuns(SWIGLU_KERNEL)) return swigluReference(gate, up);
  const f = tf.customGrad(((g: tf.Tensor, u: tf.Tensor, save: tf.GradSaveFunc) => {
    save([g, u]);
    return {
      value: tf.engine().runKernel(SWIGLU_KERNEL, { gate: g, up: u }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [gs, us] = saved;
        return swigluBackward(dy, gs, us);
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(gate, up) as T;
}

/**
 * silu(g) · u of gu [N, 2·I] holding each row's gate then its up (decoding's gate/up product) → [N, I], with its
 * gradient; one kernel forward on webgpu, reading the halves in place; a split and swiglu elsewhere.
 */
export function swigluHalves(gu: tf.Tensor2D): tf.Tensor2D {
  const width = gu.shape[1];
  if (width % 2 !== 0) throw new SwigluShapeError(`gate/up rows of ${width}, not an even width`);
  if (!ourKernelRuns(SWIGLU_KERNEL)) {
    const [g, u] = tf.split(gu, 2, 1) as tf.Tensor2D[];
    return swigluReference(g, u);
  }
  const f = tf.customGrad(((x: tf.Tensor, save: tf.GradSaveFunc) => {
    save([x]);
    return {
      value: tf.engine().runKernel(SWIGLU_KERNEL, { gate: x }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => swigluHalvesBackward(dy, saved[0]),
    };
  }) as unknown as CustomGradientFunc);
  return f(gu) as tf.Tensor2D;
}
