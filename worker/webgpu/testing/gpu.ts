/**
 * When the WebGPU tests run: wherever Dawn finds an adapter (a GPU, or Mesa's lavapipe, which .ci/run installs).
 * They skip only when that prerequisite is missing: no Vulkan loader, no `webgpu` package, no adapter. Anything
 * else (the numerics self-check failing, a shader that does not compile) must fail a test, never read as a skip.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as tf from '@tensorflow/tfjs';
import { webgpuAdapterMissing } from '../../backend.ts';

/** Dawn prints a warning when it cannot load Vulkan: look for the loader first, so that a machine without it skips silently. */
function vulkanLoaderPresent(): boolean {
  const dirs = [...(process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean), '/usr/lib/x86_64-linux-gnu', '/usr/lib64', '/usr/lib', '/lib/x86_64-linux-gnu', '/usr/local/lib'];
  return process.platform !== 'linux' || dirs.some((d) => existsSync(`${d}/libvulkan.so.1`));
}

/** The missing prerequisite, or null when the WebGPU tests must run (and pass). */
export async function webgpuSkipReason(): Promise<string | null> {
  if (!vulkanLoaderPresent()) return 'no Vulkan loader (libvulkan.so.1)';
  process.env.XDG_RUNTIME_DIR ??= tmpdir(); // Mesa warns without one
  return webgpuAdapterMissing();
}

/** A seeded uniform array in [−scale, scale) (mulberry32), so a failing shape can be replayed. */
export function randomArray(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1) * scale;
  }
  return out;
}

export class BackendInitError extends Error {
  override name = 'BackendInitError';
}

/** Run `f` on `backend` over tensors made there from `inputs`; the results, read asynchronously (webgpu can only). */
export async function runOn(backend: string, inputs: { data: Float32Array; shape: number[] }[], f: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[]): Promise<Float32Array[]> {
  if (!(await tf.setBackend(backend))) throw new BackendInitError(`backend ${backend} did not initialise`);
  const xs = inputs.map((i) => tf.tensor(i.data, i.shape));
  try {
    const out = f(...xs);
    const outs = Array.isArray(out) ? out : [out];
    try {
      return await Promise.all(outs.map(async (o) => (await o.data()) as Float32Array));
    } finally {
      tf.dispose(outs);
    }
  } finally {
    tf.dispose(xs); // also when f throws (a refusal test): its inputs must not outlive it
  }
}

/** Largest |a − b| / (atol + rtol·|b|) over all elements: ≤ 1 means within tolerance. */
export function worstRatio(a: Float32Array, b: Float32Array, atol: number, rtol: number): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    const r = Math.abs(a[i] - b[i]) / (atol + rtol * Math.abs(b[i]));
    worst = Number.isNaN(r) ? Infinity : Math.max(worst, r);
  }
  return worst;
}

/** Names of the tfjs kernels `f` ran on the active backend (tf.profile), to check that our kernel, not a fallback, ran. */
export async function kernelsRun(inputs: { data: Float32Array; shape: number[] }[], f: (...xs: tf.Tensor[]) => tf.Tensor | tf.Tensor[]): Promise<string[]> {
  const xs = inputs.map((i) => tf.tensor(i.data, i.shape));
  const info = await tf.profile(() => {
    const out = f(...xs);
    return out;
  });
  tf.dispose(xs);
  return info.kernels.map((k) => k.name).filter((name) => name !== ''); // customGrad records an unnamed entry
}
