/**
 * Reading results back to the host on any backend: `dataSync` where the active backend can (wasm, cpu: no
 * promise, no event-loop turn), `await data()` where it cannot (WebGPU under Node, see backend.ts).
 */
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend } from './backend.ts';

/** The values of several scalar tensors, in order; disposes them. Asynchronous backends read them in one transfer. */
export async function readScalars(scalars: tf.Tensor[]): Promise<number[]> {
  if (scalars.length === 0) return [];
  let values: number[];
  if (readsSyncOnActiveBackend()) {
    values = scalars.map((t) => t.dataSync()[0]);
  } else {
    const all = tf.tidy(() => tf.stack(scalars.map((t) => tf.reshape(t, []))));
    values = Array.from(await all.data());
    all.dispose();
  }
  tf.dispose(scalars);
  return values;
}

/**
 * Copies of the values of several tensors as of this call: on wasm/cpu all read synchronously, elsewhere every
 * read starts before the first await, so a weight update that runs meanwhile cannot mix into the snapshot.
 */
export async function readAllFloats(tensors: tf.Tensor[]): Promise<Float32Array[]> {
  if (readsSyncOnActiveBackend()) return tensors.map((t) => (t.dataSync() as Float32Array).slice());
  const values = (await Promise.all(tensors.map((t) => t.data()))) as Float32Array[];
  return values.map((v) => v.slice());
}
