/**
 * A trunk's keys and values as inputs of the micro-batches behind it, and the chain rule back through it
 * (train.ts batchGradients runs the passes; prefix-tree.ts planTreeRuns finds the trunks).
 *
 * Why it is exact. A micro-batch behind a trunk computes its nodes from the trunk's post-RoPE keys and values K_l,
 * V_l (every layer l) and the parameters θ: its loss is f(θ, K(θ), V(θ)), K and V being functions of θ through the
 * trunk's own forward. So dL/dθ = ∂f/∂θ + Σ_l ⟨∂f/∂K_l, ∂K_l/∂θ⟩ + ⟨∂f/∂V_l, ∂V_l/∂θ⟩. The first term is the
 * micro-batch's gradient with K and V held as inputs (here: variables in its gradient's list, so that it hands
 * back ∂f/∂K and ∂f/∂V too). The rest, summed over the micro-batches of the run, is the gradient of the surrogate
 * Σ_l ⟨K_l(θ), G_l⟩ + ⟨V_l(θ), H_l⟩ with G, H those summed key gradients held constant: one backward through the
 * trunk for the whole run, together with the trunk's own loss entries.
 */
import * as tf from '@tensorflow/tfjs';
import type { GroupedKv } from './model.ts';

/**
 * The trunk's keys and values per layer as variables of a gradient (copies sharing the tensors' data): a
 * micro-batch's tf.variableGrads lists them beside the parameters. They are never updated; dispose them after the run.
 */
export function trunkInputs(kv: GroupedKv[]): GroupedKv[] {
  return kv.map(({ k, v }) => ({ k: tf.variable(k, true), v: tf.variable(v, true) }));
}

/**
 * Σ_l ⟨K_l, G_l⟩ + ⟨V_l, H_l⟩ for the trunk's pass: `kv` its keys and values per layer (under the gradient tape),
 * `keyGrads` the summed gradients of the micro-batches with respect to them, [G_0, H_0, G_1, H_1, …] (constants).
 */
export function trunkSurrogate(kv: GroupedKv[], keyGrads: readonly (tf.Tensor | null)[]): tf.Scalar {
  if (keyGrads.length !== 2 * kv.length) throw new RangeError(`${keyGrads.length} key gradients for a trunk of ${kv.length} layers`);
  const terms: tf.Scalar[] = [];
  kv.forEach(({ k, v }, l) => {
    const [dk, dv] = [keyGrads[2 * l], keyGrads[2 * l + 1]];
    if (dk) terms.push(tf.sum(tf.mul(k, dk)));
    if (dv) terms.push(tf.sum(tf.mul(v, dv)));
  });
  return terms.length > 0 ? (tf.addN(terms) as tf.Scalar) : tf.scalar(0);
}

export function disposeKv(kv: GroupedKv[]): void {
  tf.dispose(kv.flatMap(({ k, v }) => [k, v]));
}
