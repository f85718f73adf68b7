/**
 * The webgpu backend's device, asked for with the optional features our kernels use. tfjs-backend-webgpu's own
 * factory requests only `timestamp-query` (and `bgra8unorm-storage`), so a shader with `enable f16;` or
 * `enable subgroups;` would not compile on its device; this factory is tfjs's (same limits, same backend class) plus
 * `shader-f16` and `subgroups` where the adapter offers them. Each feature is then tried by compiling a small
 * shader that uses it, and only what compiles is reported usable (a driver may list a feature it miscompiles).
 *
 * Dawn's subgroup-matrix feature (`chromium-experimental-subgroup-matrix`, cooperative matrices) is known to the
 * `webgpu` package's dawn.node (0.6.2): adapters list it in `features` and describe its shapes in
 * `info.subgroupMatrixConfigs`. We report what the adapter says and do not use it: it is experimental (WGSL's
 * `chromium_experimental_subgroup_matrix` extension) and lavapipe, where CI tests, has no configuration.
 */
/// <reference types="@webgpu/types" />
import * as tf from '@tensorflow/tfjs';
import { compiles } from './gpu.ts';

/** tfjs-backend-webgpu's priority for its backend (base.ts); kept so that the registry orders backends as before. */
const WEBGPU_BACKEND_PRIORITY = 3;

const SUBGROUP_MATRIX_FEATURE = 'chromium-experimental-subgroup-matrix';

/** What our kernels may use on a device, each checked by compiling a shader that needs it. */
export interface GpuFeatures {
  /** `enable f16;`: f16 storage buffers, workgroup memory and arithmetic. */
  shaderF16: boolean;
  /** `enable subgroups;` with the `subgroup_id`/`num_subgroups` builtins (WGSL language feature `subgroup_id`). */
  subgroups: boolean;
  /** The adapter offers Dawn's subgroup-matrix feature (reported only; no kernel uses it). */
  subgroupMatrixOffered: boolean;
  /** The adapter's `info.subgroupMatrixConfigs`, as text, when it has any. */
  subgroupMatrixConfigs: string[];
  /** Every feature name the adapter lists. */
  adapterFeatures: string[];
}

const NO_FEATURES: GpuFeatures = { shaderF16: false, subgroups: false, subgroupMatrixOffered: false, subgroupMatrixConfigs: [], adapterFeatures: [] };

const featuresByDevice = new WeakMap<GPUDevice, GpuFeatures>();

/** The features found usable on `device` (none for a device this module did not create). */
export function featuresOf(device: GPUDevice): GpuFeatures {
  return featuresByDevice.get(device) ?? NO_FEATURES;
}

/** Features of the last device created here (null before the webgpu backend was first initialised). */
let lastFeatures: GpuFeatures | null = null;

export function webgpuFeatures(): GpuFeatures | null {
  return lastFeatures;
}

const F16_PROBE = `enable f16;
@group(0) @binding(0) var<storage, read_write> out : array<f16>;
var<workgroup> tile : array<f16, 64>;
@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i : u32) {
  tile[i] = f16(i) * 0.5h;
  workgroupBarrier();
  out[i] = tile[63u - i];
}`;

const SUBGROUP_PROBE = `enable subgroups;
@group(0) @binding(0) var<storage, read_write> out : array<f32>;
@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i : u32, @builtin(subgroup_id) sg : u32,
    @builtin(num_subgroups) nsg : u32, @builtin(subgroup_invocation_id) lane : u32) {
  let s = subgroupAdd(f32(i));
  if (lane == 0u) { out[sg] = s + f32(nsg); }
}`;

/** A WGSL language feature of this implementation (`subgroup_id`: without it a subgroup's place in its workgroup is unknown). */
function hasWgslFeature(name: string): boolean {
  const gpu = (globalThis as unknown as { navigator?: { gpu?: { wgslLanguageFeatures?: ReadonlySet<string> } } }).navigator?.gpu;
  return gpu?.wgslLanguageFeatures?.has(name) ?? false;
}

async function probeFeatures(adapter: GPUAdapter, device: GPUDevice): Promise<GpuFeatures> {
  const has = (f: string) => device.features.has(f as GPUFeatureName);
  const info = (adapter as unknown as { info?: { subgroupMatrixConfigs?: unknown[] } }).info;
  return {
    shaderF16: has('shader-f16') && (await compiles(device, F16_PROBE)),
    subgroups: has('subgroups') && hasWgslFeature('subgroup_id') && (await compiles(device, SUBGROUP_PROBE)),
    subgroupMatrixOffered: adapter.features.has(SUBGROUP_MATRIX_FEATURE as GPUFeatureName),
    subgroupMatrixConfigs: (info?.subgroupMatrixConfigs ?? []).map((c) => JSON.stringify(c, (_k, v: unknown) => v)),
    adapterFeatures: [...adapter.features].map(String).sort(),
  };
}

/**
 * Replace tfjs-backend-webgpu's factory with one that asks for our features. Call after importing the package and
 * before the backend is first initialised (setBackend('webgpu')).
 */
export async function registerWebGpuBackendWithFeatures(): Promise<void> {
  const { WebGPUBackend } = (await import('@tensorflow/tfjs-backend-webgpu')) as unknown as { WebGPUBackend: new (device: GPUDevice, info?: unknown) => tf.KernelBackend };
  const gpu = (globalThis as unknown as { navigator: { gpu: GPU } }).navigator.gpu;
  tf.removeBackend('webgpu');
  tf.registerBackend(
    'webgpu',
    async () => {
      const powerPreference = tf.env().getBool('WEBGPU_USE_LOW_POWER_GPU') ? 'low-power' : 'high-performance';
      const adapter = await gpu.requestAdapter({ powerPreference });
      if (!adapter) throw new Error('no WebGPU adapter found');
      const wanted = ['timestamp-query', 'bgra8unorm-storage', 'shader-f16', 'subgroups'];
      const requiredFeatures = wanted.filter((f) => adapter.features.has(f as GPUFeatureName)) as GPUFeatureName[];
      const l = adapter.limits;
      const device = await adapter.requestDevice({
        requiredFeatures,
        requiredLimits: {
          maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
          maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
          maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
          maxBufferSize: l.maxBufferSize,
          maxComputeWorkgroupSizeX: l.maxComputeWorkgroupSizeX,
          maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
          // WebGPU's default is 8; with the adapter's own (16 on lavapipe) the chunked AddN of the optimizer's global
          // norm (backend.ts) takes more terms a dispatch.
          maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
        },
      });
      const features = await probeFeatures(adapter, device);
      featuresByDevice.set(device, features);
      lastFeatures = features;
      return new WebGPUBackend(device, (adapter as unknown as { info?: unknown }).info);
    },
    WEBGPU_BACKEND_PRIORITY,
  );
}
