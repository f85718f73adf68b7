/**
 * Backend selection for TensorFlow.js, best first: tensorflow-gpu (libtensorflow + CUDA), webgpu (Dawn via the
 * `webgpu` package, only when it finds an adapter), tensorflow (libtensorflow CPU), wasm (SIMD), cpu (plain JS).
 *
 * The native packages are optional dependencies whose install downloads libtensorflow; where that failed they are
 * simply absent, so every candidate is imported dynamically and a failure is a reason, never a crash.
 * `AGENTJET_BACKEND` (or the `prefer` option) forces one. The first time a backend is chosen it must pass a small
 * numerics self-check against the cpu backend (matmul, softmax and one gradient); a backend that computes wrongly
 * is passed over.
 *
 * Reading results: tfjs-backend-webgpu can read synchronously (`dataSync`) only through an OffscreenCanvas, which
 * Node lacks, and dawn.node has no blocking map: under Node a WebGPU backend reads with `await data()` alone. Such a
 * backend is passed over unless the caller says it copes (`syncReads: false`, as the engine does); code that has a
 * faster synchronous path for wasm/cpu asks `readsSyncOnActiveBackend()` which one to take.
 */
import * as tf from '@tensorflow/tfjs';
import type { BackendName, BackendProbe, BackendReport, DecoderConfig } from './common/engine.ts';

export const BACKEND_ORDER: BackendName[] = ['tensorflow-gpu', 'webgpu', 'tensorflow', 'wasm', 'cpu'];

export class BackendUnavailableError extends Error {
  override name = 'BackendUnavailableError';
}

/** Largest tolerated |difference| against the cpu backend in the self-check. */
const SELF_CHECK_TOLERANCE = 1e-3;

export interface SelectOptions {
  /** The caller reads tensors with `dataSync`; false admits backends with async reads only (the engine copes). */
  syncReads?: boolean;
  /** Parameters of the model the backend will run; small models skip WebGPU when choosing automatically. */
  modelParameters?: number;
  /**
   * The model the backend will run. When given (and nothing is forced), WebGPU and the best CPU backend are both
   * measured on its shapes (worker/backend-probe.ts) and the faster is chosen, instead of WEBGPU_MIN_PARAMETERS.
   */
  model?: DecoderConfig;
}

/**
 * Below this many parameters the automatic choice passes over WebGPU, when the caller gives only the model's size
 * (with the model itself, `SelectOptions.model`, the choice is measured instead). A WebGPU decode step costs about the same
 * whatever the model's size (tfjs dispatches ~250 small GPU ops per step): on an H200 a 3.2M-parameter model
 * sampled 43 tokens/s on WebGPU and 483 on wasm, while training ran 7.2k vs 0.7k tokens/s
 * (bench/device/h200-2026-11-30-engine.json). An RL step samples and trains about as many tokens, so below a few
 * tens of millions of parameters the CPU path finishes it sooner; above, WebGPU's training wins (and wasm's 4 GiB
 * memory cannot hold the optimizer state).
 */
export const WEBGPU_MIN_PARAMETERS = 50_000_000;

/** What the WebGPU adapter says it is (the adapter the webgpu backend runs on), once one was found. */
export interface GpuAdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
}

let adapterInfo: GpuAdapterInfo | null = null;

/** The WebGPU adapter found while registering the webgpu backend, or null when none was (or it was not tried). */
export function gpuAdapterInfo(): GpuAdapterInfo | null {
  return adapterInfo;
}

type DawnGpu = { requestAdapter: (options?: object) => Promise<{ info?: Partial<GpuAdapterInfo> } | null> };

/**
 * The `webgpu` package's GPU object: one Dawn instance per thread, held for the thread's lifetime. A second
 * instance replaced the first in navigator.gpu, leaving the instance that tfjs's device runs on unreferenced and
 * collectable; seen on the H200 and on lavapipe: a segfault or a hang at a later op.
 */
let dawnInstance: Promise<DawnGpu> | null = null;

function dawn(): Promise<DawnGpu> {
  dawnInstance ??= (async () => {
    const pkg = (await import(/* @vite-ignore */ 'webgpu' as string)) as { create: (flags: string[]) => unknown; globals?: Record<string, unknown> };
    if (pkg.globals) Object.assign(globalThis, pkg.globals);
    return pkg.create([]) as DawnGpu;
  })().catch((err: unknown) => {
    dawnInstance = null;
    throw err;
  });
  return dawnInstance;
}

/**
 * Why WebGPU cannot run here at all (the `webgpu` package is absent, or Dawn finds no adapter), or null when an
 * adapter exists. Only these count as "unavailable" for tests that skip without a GPU: any other error is thrown.
 */
export async function webgpuAdapterMissing(): Promise<string | null> {
  let gpu: DawnGpu;
  try {
    gpu = await dawn();
  } catch (err) {
    if (messageOf(err) === 'not installed') return 'the webgpu package is not installed';
    throw err;
  }
  return (await gpu.requestAdapter({ powerPreference: 'high-performance' })) ? null : 'no WebGPU adapter found';
}

/** The full setup, once per thread (see register). */
let dawnGpu: Promise<DawnGpu> | null = null;

/**
 * Find an adapter through Dawn, expose it as navigator.gpu, load tfjs-backend-webgpu (which looks there) and put our
 * kernels in (worker/webgpu/: the device gets shader-f16/subgroups where offered, BatchMatMul becomes ours).
 */
async function createDawnGpu(): Promise<DawnGpu> {
  const gpu = await dawn();
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new BackendUnavailableError('no WebGPU adapter found');
  const info = adapter.info ?? {};
  adapterInfo = { vendor: info.vendor ?? '', architecture: info.architecture ?? '', device: info.device ?? '', description: info.description ?? '' };
  const g = globalThis as unknown as { navigator?: { gpu?: unknown } };
  if (!g.navigator) Object.defineProperty(globalThis, 'navigator', { value: {}, configurable: true, writable: true });
  (g.navigator as { gpu?: unknown }).gpu = gpu;
  await import('@tensorflow/tfjs-backend-webgpu');
  addNInChunksOnWebGpu();
  const { installWebGpuKernels } = await import('./webgpu/register.ts');
  await installWebGpuKernels();
  return gpu;
}

/** Register the backend with tfjs (import its package); returns the tfjs backend name or throws with a reason. */
async function register(name: BackendName): Promise<string> {
  switch (name) {
    case 'tensorflow-gpu':
      await import(/* @vite-ignore */ '@tensorflow/tfjs-node-gpu' as string);
      return 'tensorflow';
    case 'tensorflow':
      await import(/* @vite-ignore */ '@tensorflow/tfjs-node' as string);
      return 'tensorflow';
    case 'webgpu':
      // Once per thread (see dawn()).
      dawnGpu ??= createDawnGpu().catch((err: unknown) => {
        dawnGpu = null;
        throw err;
      });
      await dawnGpu;
      return 'webgpu';
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

/**
 * tfjs-backend-webgpu's AddN binds every input as its own storage buffer, and a shader stage may have only
 * `maxStorageBuffersPerShaderStage` of them (Dawn offers 8 to 16): the optimizer's global norm adds one term per
 * weight (45 for 4 layers), its pipeline is invalid, and the whole command buffer it was batched into is dropped
 * (every value read back is 0). Add in chunks that fit, then add the partial sums.
 */
function addNInChunksOnWebGpu(): void {
  const original = tf.getKernel(tf.AddN, 'webgpu');
  if (!original || (original.kernelFunc as { chunked?: boolean }).chunked) return;
  const kernelFunc = original.kernelFunc;
  type Backend = { device: { limits: { maxStorageBuffersPerShaderStage: number } }; disposeData(dataId: object): void };
  const chunked: tf.KernelFunc = ({ inputs, backend, attrs }) => {
    const gpu = backend as unknown as Backend;
    const maxInputs = gpu.device.limits.maxStorageBuffersPerShaderStage - 1; // one binding is the output
    const partialSums = new Set<tf.TensorInfo>(); // made here: disposed once added in
    const addIn = (terms: tf.TensorInfo[]) => {
      const sum = kernelFunc({ inputs: terms as unknown as tf.NamedTensorInfoMap, backend, attrs }) as tf.TensorInfo;
      for (const t of terms) if (partialSums.delete(t)) gpu.disposeData(t.dataId);
      return sum;
    };
    let terms = Object.values(inputs) as tf.TensorInfo[];
    while (terms.length > maxInputs) {
      const next: tf.TensorInfo[] = [];
      for (let i = 0; i < terms.length; i += maxInputs) {
        const chunk = terms.slice(i, i + maxInputs);
        const sum = chunk.length === 1 ? chunk[0] : addIn(chunk);
        if (chunk.length > 1) partialSums.add(sum);
        next.push(sum);
      }
      terms = next;
    }
    return addIn(terms);
  };
  tf.unregisterKernel(tf.AddN, 'webgpu');
  tf.registerKernel({ ...original, kernelFunc: Object.assign(chunked, { chunked: true }) });
}

/**
 * A few ops whose results we compare across backends (read asynchronously: every backend can do that). Every
 * tensor has over 1000 elements, or tfjs-backend-webgpu would hand ops on fresh tensors to its cpu fallback
 * (WEBGPU_CPU_HANDOFF_SIZE_THRESHOLD) and check less of the GPU.
 */
async function probe(): Promise<Float32Array> {
  const out = tf.tidy(() => {
    const a = tf.tensor2d(Array.from({ length: 32 * 40 }, (_, i) => 0.5 * Math.sin(i * 0.7)), [32, 40]);
    const b = tf.tensor2d(Array.from({ length: 40 * 36 }, (_, i) => 0.5 * Math.cos(i * 1.3)), [40, 36]);
    const prod = tf.matMul(a, b); // [32, 36]
    const soft = tf.softmax(prod); // [32, 36]
    const grad = tf.grad((x: tf.Tensor) => tf.sum(tf.square(tf.matMul(x as tf.Tensor2D, b))))(a); // [32, 40]
    return tf.concat([prod.flatten(), soft.flatten(), grad.flatten()]);
  });
  const values = (await out.data()) as Float32Array;
  out.dispose();
  return values;
}

/** Whether a result computed on the active backend can be read with `dataSync` (not on WebGPU under Node). */
function readsSynchronously(): boolean {
  // Keep tfjs-backend-webgpu's "synchronous reads are slow" warning out of the log: this read is a probe.
  (tf.backend() as unknown as { hasReadSyncWarned?: boolean }).hasReadSyncWarned = true;
  // Large enough that tfjs-backend-webgpu computes it on the GPU (it hands tiny ops to its cpu fallback).
  const t = tf.tidy(() => tf.matMul(tf.ones([64, 64]), tf.ones([64, 64])));
  try {
    t.dataSync();
    return true;
  } catch {
    return false;
  } finally {
    t.dispose();
  }
}

let reference: Float32Array | null = null;

/** The self-check's verdict; `failure` says how it failed when it was not a tolerance exceeded. */
interface SelfCheck {
  ok: boolean;
  maxAbsError: number;
  failure?: 'initialisation failed' | 'non-finite results';
}

async function selfCheck(tfName: string): Promise<SelfCheck> {
  if (!reference) {
    // Production mode: tfjs then skips its console banners (e.g. "install the node backend" on first cpu use).
    tf.env().set('PROD', true);
    await tf.setBackend('cpu');
    reference = await probe();
  }
  // tfjs says why an initialisation failed only as a warning, which production mode silences: say at least that.
  if (!(await tf.setBackend(tfName))) return { ok: false, maxAbsError: Infinity, failure: 'initialisation failed' };
  await tf.ready();
  const got = await probe();
  let maxAbsError = 0;
  for (let i = 0; i < got.length; i++) maxAbsError = Math.max(maxAbsError, Math.abs(got[i] - reference[i]));
  if (!Number.isFinite(maxAbsError)) return { ok: false, maxAbsError: Infinity, failure: 'non-finite results' };
  return { ok: maxAbsError <= SELF_CHECK_TOLERANCE, maxAbsError };
}

/** tfjs backends (by tfjs name) found unable to read synchronously here. */
const asyncReadBackends = new Set<string>();

/** Whether results on the active tfjs backend can be read with `dataSync` (false for WebGPU under Node). */
export function readsSyncOnActiveBackend(): boolean {
  return !asyncReadBackends.has(tf.getBackend());
}

let selected: BackendReport | null = null;
/** Whether `selected` can read synchronously (a backend chosen with `syncReads: false` may not). */
let selectedReadsSync = false;

function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  if (/Cannot find (module|package)|ERR_MODULE_NOT_FOUND/.test(text)) return 'not installed';
  return text.split('\n')[0].slice(0, 200);
}

/** A backend that registered, passed the self-check and may serve the caller. */
interface Admitted {
  name: BackendName;
  tfName: string;
  check: SelfCheck;
  readsSync: boolean;
  /** WebGPU: which matmul kernels were measured faster (worker/webgpu/matmul.ts calibrateMatmul). */
  kernels?: string;
}

/**
 * WebGPU against the best CPU backend that loaded, both measured on the model (worker/backend-probe.ts, imported
 * here only: it needs the model code, which imports this module). A backend whose probe fails (an error, logits off
 * their exact sum, or a model the CPU backend cannot hold) is passed over with that reason; when both
 * fail, the CPU backend stays (the engine's own errors then say more than a probe's).
 */
async function measuredChoice(gpu: Admitted, cpu: Admitted, model: DecoderConfig, passedOver: BackendReport['passedOver']): Promise<{ chosen: Admitted; report: BackendReport }> {
  const { cannotHold, describeProbe, fasterOf, probeActiveBackend } = await import('./backend-probe.ts');
  let cpuProbe: BackendProbe | null = null;
  let cpuFailure = cannotHold(cpu.name, model);
  if (!cpuFailure) {
    try {
      await tf.setBackend(cpu.tfName);
      cpuProbe = await probeActiveBackend(cpu.name, model);
    } catch (err) {
      cpuFailure = `failed the probe on the model: ${messageOf(err)}`;
    }
  }
  let gpuProbe: BackendProbe | null = null;
  let gpuFailure: string | null = null;
  try {
    await tf.setBackend(gpu.tfName);
    gpuProbe = await probeActiveBackend(gpu.name, model);
  } catch (err) {
    gpuFailure = `failed the probe on the model: ${messageOf(err)}`;
  }
  const probe = [gpuProbe, cpuProbe].filter((p): p is BackendProbe => p !== null);
  const kernels = gpu.kernels ? { kernels: gpu.kernels } : {};
  const report = (chosen: Admitted, reason: string, loser: { name: BackendName; reason: string } | null): { chosen: Admitted; report: BackendReport } => ({
    chosen,
    report: { name: chosen.name, reason, passedOver: loser ? [...passedOver, loser] : passedOver, selfCheck: chosen.check, probe, ...kernels },
  });
  let result: { chosen: Admitted; report: BackendReport };
  if (gpuProbe && cpuProbe && !gpuFailure) {
    const { winner, loser } = fasterOf(gpuProbe, cpuProbe);
    const [chosen, other] = winner.name === gpu.name ? [gpu, cpu] : [cpu, gpu];
    result = report(chosen, `measured on the model: ${describeProbe(winner)} vs ${describeProbe(loser)}`, {
      name: other.name,
      reason: `measured slower on the model: ${describeProbe(loser)} vs ${describeProbe(winner)} (AGENTJET_BACKEND forces a backend)`,
    });
  } else if (gpuProbe && !gpuFailure) {
    result = report(gpu, `measured on the model: ${describeProbe(gpuProbe)}; ${cpu.name} ${cpuFailure}`, { name: cpu.name, reason: cpuFailure! });
  } else {
    result = report(cpu, cpuProbe ? `measured on the model: ${describeProbe(cpuProbe)}` : `best that loaded (${cpuFailure})`, { name: gpu.name, reason: gpuFailure! });
  }
  await tf.setBackend(result.chosen.tfName);
  return result;
}

/**
 * Choose and activate a backend (once per thread; later calls return the same report). `prefer` (or
 * `AGENTJET_BACKEND`) forces a backend; it fails with BackendUnavailableError if that one cannot run. With
 * `options.model`, WebGPU is measured against the next backend that loads (see measuredChoice).
 */
export async function selectBackend(prefer?: BackendName, options: SelectOptions = {}): Promise<BackendReport> {
  const syncReads = options.syncReads ?? true;
  const forced = prefer ?? (process.env.AGENTJET_BACKEND as BackendName | undefined);
  if (selected && (!forced || selected.name === forced) && (selectedReadsSync || !syncReads)) {
    // tfjs's current backend is global: a caller may have switched it since (a test, a numerics check on cpu).
    const tfName = await register(selected.name);
    if (tf.getBackend() !== tfName) await tf.setBackend(tfName);
    return selected;
  }
  if (forced && !BACKEND_ORDER.includes(forced)) throw new BackendUnavailableError(`unknown backend "${forced}" (one of ${BACKEND_ORDER.join(', ')})`);
  const candidates = forced ? [forced] : BACKEND_ORDER;
  const passedOver: BackendReport['passedOver'] = [];
  const measure = !forced && options.model !== undefined;
  /** WebGPU, admitted and waiting to be measured against the next backend that loads. */
  let gpu: Admitted | null = null;
  const choose = (a: Admitted, report: BackendReport): BackendReport => {
    selectedReadsSync = a.readsSync;
    selected = a.kernels ? { ...report, kernels: a.kernels } : report;
    return selected;
  };
  for (const name of candidates) {
    const small = !measure && options.modelParameters !== undefined && options.modelParameters < WEBGPU_MIN_PARAMETERS;
    if (!forced && name === 'webgpu' && small) {
      const millions = (options.modelParameters! / 1e6).toFixed(1);
      passedOver.push({ name, reason: `a model of ${millions}M parameters samples faster on the CPU than through WebGPU's per-op dispatch (threshold ${WEBGPU_MIN_PARAMETERS / 1e6}M; AGENTJET_BACKEND=webgpu forces it)` });
      continue;
    }
    try {
      const tfName = await register(name);
      const check = await selfCheck(tfName);
      if (!check.ok) {
        passedOver.push({ name, reason: `failed the numerics self-check (${check.failure ?? `max error ${check.maxAbsError}`})` });
        continue;
      }
      const readsSync = readsSynchronously();
      if (!readsSync) asyncReadBackends.add(tfName);
      if (syncReads && !readsSync) {
        passedOver.push({ name, reason: `passed the self-check (max error ${check.maxAbsError}) but cannot read results synchronously here (dataSync), which the engine needs` });
        continue;
      }
      const admitted: Admitted = { name, tfName, check, readsSync };
      if (name === 'webgpu') admitted.kernels = await (await import('./webgpu/matmul.ts')).calibrateMatmul();
      if (measure && name === 'webgpu') {
        gpu = admitted;
        continue;
      }
      if (gpu) {
        const { chosen, report } = await measuredChoice(gpu, admitted, options.model!, passedOver);
        return choose(chosen, report);
      }
      return choose(admitted, { name, reason: forced ? (prefer ? 'forced by option' : 'forced by AGENTJET_BACKEND') : 'best that loaded', passedOver, selfCheck: check });
    } catch (err) {
      passedOver.push({ name, reason: messageOf(err) });
    }
  }
  if (gpu) {
    // Nothing after WebGPU loaded (the cpu backend always does, so only when it was itself unusable): no contest.
    await tf.setBackend(gpu.tfName);
    return choose(gpu, { name: gpu.name, reason: 'best that loaded (nothing else loaded to measure it against)', passedOver, selfCheck: gpu.check });
  }
  throw new BackendUnavailableError(`no usable backend: ${passedOver.map((p) => `${p.name}: ${p.reason}`).join('; ')}`);
}
