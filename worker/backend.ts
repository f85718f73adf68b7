/**
 * Backend selection for TensorFlow.js, best first: tensorflow-gpu (libtensorflow + CUDA), webgpu (Dawn via the
 * `webgpu` package, only when it finds an adapter), tensorflow (libtensorflow CPU), wasm (SIMD), cpu (plain JS).
 *
 * The native packages are optional dependencies whose install downloads libtensorflow; where that failed they are
 * simply absent, so every candidate is imported dynamically and a failure is a reason, never a crash.
 * `AGENTJET_BACKEND` (or the `prefer` option) forces one. The first time a backend is chosen it must pass a small
 * numerics self-check against the cpu backend (matmul, softmax and one gradient); a backend that computes wrongly
 * is passed over.
 */
import * as tf from '@tensorflow/tfjs';
import type { BackendName, BackendReport } from './common/engine.ts';

export const BACKEND_ORDER: BackendName[] = ['tensorflow-gpu', 'webgpu', 'tensorflow', 'wasm', 'cpu'];

export class BackendUnavailableError extends Error {
  override name = 'BackendUnavailableError';
}

/** Largest tolerated |difference| against the cpu backend in the self-check. */
const SELF_CHECK_TOLERANCE = 1e-3;

/** Register the backend with tfjs (import its package); returns the tfjs backend name or throws with a reason. */
async function register(name: BackendName): Promise<string> {
  switch (name) {
    case 'tensorflow-gpu':
      await import(/* @vite-ignore */ '@tensorflow/tfjs-node-gpu' as string);
      return 'tensorflow';
    case 'tensorflow':
      await import(/* @vite-ignore */ '@tensorflow/tfjs-node' as string);
      return 'tensorflow';
    case 'webgpu': {
      const dawn = (await import(/* @vite-ignore */ 'webgpu' as string)) as { create: (flags: string[]) => unknown; globals?: Record<string, unknown> };
      const g = globalThis as unknown as { navigator?: { gpu?: unknown } };
      if (dawn.globals) Object.assign(globalThis, dawn.globals);
      const gpu = dawn.create([]) as { requestAdapter: () => Promise<unknown> };
      const adapter = await gpu.requestAdapter();
      if (!adapter) throw new BackendUnavailableError('no WebGPU adapter found');
      if (!g.navigator) Object.defineProperty(globalThis, 'navigator', { value: {}, configurable: true, writable: true });
      (g.navigator as { gpu?: unknown }).gpu = gpu;
      await import('@tensorflow/tfjs-backend-webgpu');
      return 'webgpu';
    }
    case 'wasm':
      await import('@tensorflow/tfjs-backend-wasm');
      shareDataInWasmIdentity();
      return 'wasm';
    case 'cpu':
      return 'cpu';
  }
}

/**
 * tfjs clones every tensor it saves for the backward pass (an Identity kernel), and the wasm backend's Identity
 * copies the data: hundreds of full copies per training step (measured: a quarter of a step's time). Tensors are
 * immutable (a Variable's assign swaps its data, never writes in place), so sharing the data with a reference
 * count — what wasm's own Reshape and the cpu backend's Identity do — is safe.
 */
function shareDataInWasmIdentity(): void {
  tf.unregisterKernel(tf.Identity, 'wasm');
  tf.registerKernel({
    kernelName: tf.Identity,
    backendName: 'wasm',
    kernelFunc: ({ inputs, backend }) => {
      const x = inputs.x as tf.TensorInfo;
      (backend as unknown as { incRef(dataId: object): void }).incRef(x.dataId);
      return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
    },
  });
}

/** A few ops whose results we compare across backends. */
function probe(): Float32Array {
  return tf.tidy(() => {
    const a = tf.tensor2d(Array.from({ length: 48 }, (_, i) => Math.sin(i * 0.7)), [6, 8]);
    const b = tf.tensor2d(Array.from({ length: 40 }, (_, i) => Math.cos(i * 1.3)), [8, 5]);
    const prod = tf.matMul(a, b); // [6, 5]
    const soft = tf.softmax(prod); // [6, 5]
    const grad = tf.grad((x: tf.Tensor) => tf.sum(tf.square(tf.matMul(x as tf.Tensor2D, b))))(a); // [6, 8]
    return tf.concat([prod.flatten(), soft.flatten(), grad.flatten()]).dataSync() as Float32Array;
  });
}

let reference: Float32Array | null = null;

async function selfCheck(tfName: string): Promise<{ ok: boolean; maxAbsError: number }> {
  if (!reference) {
    // Production mode: tfjs then skips its console banners (e.g. "install the node backend" on first cpu use).
    tf.env().set('PROD', true);
    await tf.setBackend('cpu');
    reference = probe().slice();
  }
  if (!(await tf.setBackend(tfName))) return { ok: false, maxAbsError: Infinity };
  await tf.ready();
  const got = probe();
  let maxAbsError = 0;
  for (let i = 0; i < got.length; i++) maxAbsError = Math.max(maxAbsError, Math.abs(got[i] - reference[i]));
  if (Number.isNaN(maxAbsError)) maxAbsError = Infinity;
  return { ok: maxAbsError <= SELF_CHECK_TOLERANCE, maxAbsError };
}

let selected: BackendReport | null = null;

function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  if (/Cannot find (module|package)|ERR_MODULE_NOT_FOUND/.test(text)) return 'not installed';
  return text.split('\n')[0].slice(0, 200);
}

/**
 * Choose and activate a backend (once per thread; later calls return the same report). `prefer` (or
 * `AGENTJET_BACKEND`) forces a backend; it fails with BackendUnavailableError if that one cannot run.
 */
export async function selectBackend(prefer?: BackendName): Promise<BackendReport> {
  const forced = prefer ?? (process.env.AGENTJET_BACKEND as BackendName | undefined);
  if (selected && (!forced || selected.name === forced)) return selected;
  if (forced && !BACKEND_ORDER.includes(forced)) throw new BackendUnavailableError(`unknown backend "${forced}" (one of ${BACKEND_ORDER.join(', ')})`);
  const candidates = forced ? [forced] : BACKEND_ORDER;
  const passedOver: BackendReport['passedOver'] = [];
  for (const name of candidates) {
    try {
      const tfName = await register(name);
      const check = await selfCheck(tfName);
      if (!check.ok) {
        passedOver.push({ name, reason: `failed the numerics self-check (max error ${check.maxAbsError})` });
        continue;
      }
      selected = { name, reason: forced ? (prefer ? 'forced by option' : 'forced by AGENTJET_BACKEND') : 'best that loaded', passedOver, selfCheck: check };
      return selected;
    } catch (err) {
      passedOver.push({ name, reason: messageOf(err) });
    }
  }
  throw new BackendUnavailableError(`no usable backend: ${passedOver.map((p) => `${p.name}: ${p.reason}`).join('; ')}`);
}
