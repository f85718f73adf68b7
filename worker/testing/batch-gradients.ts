/** A batch's gradient (train.ts batchGradients) read back to the host, for tests that compare packings. */
import * as tf from '@tensorflow/tfjs';
import { readAllFloats } from '../read.ts';
import { type BatchGradients, sumMicroBatchScalars } from '../train.ts';

export interface ReadBatchGradients {
  loss: number;
  entropy: number;
  /** Σ k3 over the trained tokens (0 without a KL term) and the clipped count (0 for SFT). */
  kl: number;
  clipped: number;
  /** One per trainable variable, in the state's order. */
  grads: Float32Array[];
  computedTokens: number;
  microBatches: number;
}

/** Reads (asynchronously: every backend can) and disposes the gradients and scalars. */
export async function readBatchGradients(out: BatchGradients): Promise<ReadBatchGradients> {
  const values = await readAllFloats([...out.scalars, ...out.grads]);
  tf.dispose([...out.scalars, ...out.grads]);
  const sums = sumMicroBatchScalars(
    values.slice(0, out.scalars.length).map((v) => v[0]),
    out.scalarLayout,
  );
  return { loss: sums.loss, entropy: sums.entropy, kl: sums.kl, clipped: sums.clipped, grads: values.slice(out.scalars.length), computedTokens: out.computedTokens, microBatches: out.microBatches };
}
