/**
 * The part of tfjs-backend-webgpu our own kernels stand on: its device, its tensor storage and its command
 * batching, reached through the backend object a kernel function is handed. Our shaders are whole WGSL modules
 * (tfjs's program builder prepends its own header, so it cannot carry `enable f16;` or `enable subgroups;`, which
 * must come first); they are compiled here, cached per device, and recorded into tfjs's open compute pass exactly
 * as tfjs records its own programs (same batching, same deferred release of the buffers a queued dispatch uses, same
 * timestamp queries under tf.time/tf.profile), so they interleave with tfjs's kernels.
 *
 * Bindings, by convention: 0 = output, 1…n = inputs in order, n+1 = the uniform block (scalar i32/f32 fields).
 */
/// <reference types="@webgpu/types" />
import * as tf from '@tensorflow/tfjs';

/** WebGPU's guaranteed `maxComputeWorkgroupsPerDimension`; grids fold larger counts into y (see gridFor). */
export const MAX_WORKGROUPS_PER_DIMENSION = 65_535;

export class WebGpuKernelError extends Error {
  override name = 'WebGpuKernelError';
}

/**
 * A tensor larger than the device's `maxStorageBufferBindingSize`: bound anyway, the dispatch's command buffer is
 * invalid and its results are garbage (seen on lavapipe, 128 MiB, with Qwen2.5-0.5B's 545 MB embedding), so our
 * kernels refuse it by name instead.
 */
export class BindingTooLargeError extends Error {
  override name = 'BindingTooLargeError';
}

/** What a tensor is on the webgpu backend (tfjs's TensorData, the fields we read). */
interface TensorData {
  resource: GPUBuffer | GPUTexture | null;
  shape: number[];
  dtype: string;
}

interface UniformField {
  type: 'int32' | 'float32' | 'uint32';
  data: number[];
}

/** tfjs-backend-webgpu's WebGPUBackend, the members this folder uses (it exports the class but not these types). */
export interface WebGpuBackend {
  device: GPUDevice;
  tensorMap: { get(dataId: object): TensorData; has(dataId: object): boolean };
  makeTensorInfo(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  uploadToGPU(dataId: object): void;
  disposeData(dataId: object, force?: boolean): boolean;
  makeUniforms(fields: UniformField[]): GPUBufferBinding;
  ensureCommandEncoderReady(): void;
  endComputePassEncoder(): void;
  submitQueue(): void;
  commandEncoder: GPUCommandEncoder | null;
  computePassEncoder: GPUComputePassEncoder | null;
  dispatchCountInPass: number;
  commandQueueOwnedIds: WeakSet<object>;
  activeTimers: { name: string; query: Promise<number> }[] | null;
  supportTimestampQuery: boolean;
  querySet: GPUQuerySet | null;
  querySetCount: number;
  getQueryTime(): Promise<number>;
}

export function asWebGpu(backend: unknown): WebGpuBackend {
  return backend as WebGpuBackend;
}

/** A scalar uniform: WGSL `i32` or `f32` field of the kernel's `U` struct, in the order given. */
export type Uniform = { i32: number } | { f32: number };

export interface Dispatch {
  /** Cache key of the WGSL source (the source itself is only built on a miss). */
  key: string;
  wgsl: () => string;
  /** Read-only storage inputs, bound 1…n. */
  inputs: tf.TensorInfo[];
  output: { shape: number[]; dtype?: tf.DataType };
  uniforms: Uniform[];
  workgroups: [number, number, number];
  /** Shown by tf.profile (like tfjs's program class names). */
  name: string;
}

const pipelines = new WeakMap<GPUDevice, Map<string, GPUComputePipeline>>();

function pipelineFor(device: GPUDevice, key: string, wgsl: () => string, name: string): GPUComputePipeline {
  let cache = pipelines.get(device);
  if (!cache) pipelines.set(device, (cache = new Map()));
  let pipeline = cache.get(key);
  if (!pipeline) {
    const module = device.createShaderModule({ code: wgsl(), label: name });
    pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' }, label: name });
    cache.set(key, pipeline);
  }
  return pipeline;
}

/**
 * Compile a shader off the critical path and say whether the device accepts it (createComputePipelineAsync rejects
 * on a validation error, where the synchronous call would hand back an invalid pipeline that silently drops the
 * command buffer it is recorded into). Used once per feature at registration.
 */
export async function compiles(device: GPUDevice, wgsl: string): Promise<boolean> {
  try {
    device.pushErrorScope('validation');
    const module = device.createShaderModule({ code: wgsl });
    await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    return (await device.popErrorScope()) === null;
  } catch {
    await device.popErrorScope().catch(() => null);
    return false;
  }
}

/** Workgroup grid for `count` workgroups: x up to the per-dimension limit, the rest folded into y. */
export function gridFor(count: number): [number, number, number] {
  if (count <= MAX_WORKGROUPS_PER_DIMENSION) return [Math.max(count, 1), 1, 1];
  const y = Math.ceil(count / MAX_WORKGROUPS_PER_DIMENSION);
  if (y > MAX_WORKGROUPS_PER_DIMENSION) throw new WebGpuKernelError(`${count} workgroups exceed a 2-D grid`);
  return [MAX_WORKGROUPS_PER_DIMENSION, y, 1];
}

/** The WGSL struct of `uniforms`, named U, with fields named as given. */
export function uniformStruct(fields: [name: string, type: 'i32' | 'f32'][]): string {
  return `struct U {\n${fields.map(([n, t]) => `  ${n} : ${t},`).join('\n')}\n};`;
}

/** The GPU buffer of a tensor on this backend, uploaded first when its values are still on the host. */
/** Throws BindingTooLargeError when a float32/int32 tensor of `shape` cannot be bound on this device. */
export function checkBindable(gpu: WebGpuBackend, shape: number[]): void {
  const bytes = 4 * tf.util.sizeFromShape(shape);
  const limit = gpu.device.limits.maxStorageBufferBindingSize;
  if (bytes > limit) throw new BindingTooLargeError(`a tensor of ${bytes} bytes [${shape}] exceeds this device's ${limit}-byte storage binding`);
}

export function bufferOf(gpu: WebGpuBackend, t: tf.TensorInfo): GPUBuffer {
  checkBindable(gpu, t.shape);
  gpu.uploadToGPU(t.dataId);
  const resource = gpu.tensorMap.get(t.dataId).resource;
  if (!(resource instanceof GPUBuffer)) throw new WebGpuKernelError('input is not held in a GPU buffer');
  return resource;
}

/** Record one dispatch of our own shader into tfjs's command stream; returns the new output tensor. */
export function dispatch(gpu: WebGpuBackend, d: Dispatch): tf.TensorInfo {
  for (const shape of [d.output.shape, ...d.inputs.map((t) => t.shape)]) checkBindable(gpu, shape);
  const output = gpu.makeTensorInfo(d.output.shape, d.output.dtype ?? 'float32');
  const outBuffer = bufferOf(gpu, output);
  const inBuffers = d.inputs.map((t) => bufferOf(gpu, t));
  const pipeline = pipelineFor(gpu.device, d.key, d.wgsl, d.name);
  // tfjs's uniform pool wants at least one field; 16-byte multiples keep every driver's minimum binding size happy.
  const fields: UniformField[] = d.uniforms.map((u) => ('i32' in u ? { type: 'int32', data: [u.i32] } : { type: 'float32', data: [u.f32] }));
  while (fields.length === 0 || fields.length % 4 !== 0) fields.push({ type: 'int32', data: [0] });
  const entries: GPUBindGroupEntry[] = [outBuffer, ...inBuffers].map((buffer, i) => ({ binding: i, resource: { buffer } }));
  entries.push({ binding: entries.length, resource: gpu.makeUniforms(fields) });
  const bindGroup = gpu.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
  // Buffers a queued dispatch reads or writes are released only after the queue is submitted (disposeData).
  for (const t of [...d.inputs, output]) gpu.commandQueueOwnedIds.add(t.dataId);

  const timed = gpu.activeTimers != null;
  gpu.ensureCommandEncoderReady();
  if (timed && gpu.supportTimestampQuery) {
    gpu.endComputePassEncoder();
    gpu.querySet ??= gpu.device.createQuerySet({ type: 'timestamp', count: gpu.querySetCount });
    gpu.computePassEncoder = gpu.commandEncoder!.beginComputePass({ timestampWrites: { querySet: gpu.querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
  } else if (!gpu.computePassEncoder) {
    gpu.computePassEncoder = gpu.commandEncoder!.beginComputePass({});
  }
  const pass = gpu.computePassEncoder!;
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bindGroup);
  pass.dispatchWorkgroups(...d.workgroups);
  gpu.dispatchCountInPass++;
  if (timed || tf.env().getNumber('WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE') <= gpu.dispatchCountInPass) {
    gpu.endComputePassEncoder();
    if (timed) gpu.activeTimers!.push({ name: d.name, query: gpu.getQueryTime() });
    else gpu.submitQueue();
  }
  return output;
}

/**
 * Floats of workgroup memory a kernel may use: WebGPU's guaranteed 16 KiB (maxComputeWorkgroupStorageSize), so that
 * the same tiles build on every adapter.
 */
export const WORKGROUP_FLOATS = 16_384 / 4;

/** Threads per workgroup of the one-thread-per-element shaders. */
export const ELEMENTWISE_WORKGROUP = 256;

/** WGSL expression of the flat invocation index under gridFor's folded grid (needs `wid`, `nwg` and `li`). */
export const FLAT_INDEX = `i32((wid.y * nwg.x + wid.x) * ${ELEMENTWISE_WORKGROUP}u + li)`;

/** WGSL entry-point parameters that FLAT_INDEX and per-workgroup row indices read. */
export const GRID_BUILTINS = '@builtin(local_invocation_index) li : u32, @builtin(workgroup_id) wid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>';

/**
 * How a row of hd floats is held: as hd/4 vec4s where hd is a multiple of 4 (every model's; a quarter of the load
 * instructions, `dot` and vector fma), else as hd f32s. Storage, tiles and per-thread rows all use the same type.
 */
export interface RowLanes {
  /** WGSL type of one element. */
  t: string;
  /** Elements per row. */
  n: number;
  /** Element a · element b, summed over its lanes. */
  dot: (a: string, b: string) => string;
}

export function rowLanes(hd: number): RowLanes {
  return hd % 4 === 0 ? { t: 'vec4<f32>', n: hd / 4, dot: (a, b) => `dot(${a}, ${b})` } : { t: 'f32', n: hd, dot: (a, b) => `${a} * ${b}` };
}

/**
 * Dispatches per command buffer while recordedTogether runs: no limit, so the whole of `f` is one command buffer,
 * submitted when its result is read (tfjs otherwise submits every WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE, 15, dispatches).
 * Buffers released meanwhile are reused only after that submit, so `f` must be small in memory: a decode step.
 */
const ONE_COMMAND_BUFFER = Number.POSITIVE_INFINITY;

/** tf.tidy(f), its kernels recorded into one command buffer on webgpu (a decode step: no submit per 15 dispatches). */
export function recordedTogether<T extends tf.TensorContainer>(f: () => T): T {
  if (tf.getBackend() !== 'webgpu') return tf.tidy(f);
  const flag = 'WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE';
  const before = tf.env().getNumber(flag);
  tf.env().set(flag, ONE_COMMAND_BUFFER);
  try {
    return tf.tidy(f);
  } finally {
    tf.env().set(flag, before);
  }
}

/** Whether the active backend is webgpu with `kernelName` registered (our ops take tf's composition elsewhere). */
export function ourKernelRuns(kernelName: string): boolean {
  return tf.getBackend() === 'webgpu' && tf.getKernel(kernelName, 'webgpu') !== undefined;
}

/**
 * How far a kernel's result strays from a reference result of the same product: the largest |got − want| over the
 * largest |want| (Infinity for a NaN, a length mismatch or a reference of zeros with a non-zero result). Calibration
 * times a kernel only where the backend's self-check has not run it; this is its check before it can be chosen.
 */
export function relativeDeviation(got: Float32Array, want: Float32Array): number {
  if (got.length !== want.length) return Infinity;
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (Number.isNaN(d)) return Infinity;
    diff = Math.max(diff, d);
    scale = Math.max(scale, Math.abs(want[i]));
  }
  return scale > 0 ? diff / scale : diff > 0 ? Infinity : 0;
}

/**
 * Largest relativeDeviation a calibrated kernel may show against its reference and still be chosen: f32 sums in
 * another order differ by ~1e-6 of the largest value; a wrong kernel (a missed K range, a stale accumulator) by far
 * more.
 */
export const CALIBRATION_CHECK_TOLERANCE = 1e-3;

/** A calibration timing batches runs while one run is shorter than this (a read-back's latency would dominate it). */
export const CALIBRATION_TARGET_MS = 20;
/** Runs per timing below CALIBRATION_TARGET_MS. */
const CALIBRATION_BATCH = 8;
/** Timings per variant; the best counts. */
const CALIBRATION_REPS = 2;

/**
 * Milliseconds per run of `run`, the best of CALIBRATION_REPS timings, for calibrating our kernels (matmul.ts,
 * fused-calibration.ts). Call it after a first run of the same work, which compiles its shaders. `run` records the
 * work and returns one tensor, which is released; a timing ends with a one-element read of its last run's (the
 * queue runs in order).
 */
export async function bestMsPerRun(run: () => tf.Tensor): Promise<number> {
  const timeBatch = async (count: number): Promise<number> => {
    const t0 = performance.now();
    let out: tf.Tensor | null = null;
    for (let i = 0; i < count; i++) {
      out?.dispose();
      out = run();
    }
    const one = tf.tidy(() => tf.slice(tf.reshape(out!, [-1]), [0], [1]));
    out!.dispose();
    await one.data();
    one.dispose();
    return (performance.now() - t0) / count;
  };
  const single = await timeBatch(1);
  const count = single > CALIBRATION_TARGET_MS ? 1 : CALIBRATION_BATCH;
  let best = single;
  for (let i = 0; i < CALIBRATION_REPS; i++) best = Math.min(best, await timeBatch(count));
  return best;
}
