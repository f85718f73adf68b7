/**
 * The trainer's core on one backend, read with `await data()` only, so that WebGPU (which cannot read
 * synchronously under Node) runs the same measurements as wasm: backend selection and self-check, matmul
 * throughput, forward+backward training throughput and uncached decoding of bench/model.ts's model.
 *
 *   node --import tsx bench/device/gpu-check.ts webgpu|wasm|cpu   → table on stdout, JSON as the last line (webgpu
 *     with shader-f16: training throughput in mixed precision too, `*_mixed`)
 *   node --import tsx bench/device/gpu-check.ts bench-model        → bench/model.ts itself (engine, sync reads)
 *   node --import tsx bench/device/gpu-check.ts select-auto[-qwen]  → the backend choice, measured on the bench model
 *     (or Qwen2.5-0.5B's shapes), as JSON
 *   node --import tsx bench/device/gpu-check.ts engine NAME [--bench] → the engine on NAME (engine-check.ts)
 *   node --import tsx bench/device/gpu-check.ts kernels [--quick]    → our WGSL kernels (worker/webgpu/): every
 *     numerics check of their tests against the cpu backend, then GFLOP/s of our matmul vs tfjs's, f32 and f16
 *     (and our subgroup shader on the decode shapes, where the device has subgroups),
 *     and a decode step's sampling of 8 rows at Qwen2.5's vocabulary (temperature alone, and with top-k and top-p):
 *     logits read and sampled here vs on the device
 *   node --import tsx bench/device/gpu-check.ts bench-model-qwen     → bench/model.ts --config qwen2.5-0.5b (f32 and
 *     mixed-precision training: train_tokens_per_s, train_mfu and their `_mixed` twins)
 *
 * bench/device/gpu-check.sh runs it on a lent GPU machine. The engine reads with dataSync on backends that can
 * and with `await data()` elsewhere (device KV cache, on-device clipping: see worker/backend.ts).
 */
import '../../p2p/polyfill.ts';
import * as tf from '@tensorflow/tfjs';
import { type GpuAdapterInfo, gpuAdapterInfo, selectBackend } from '../../worker/backend.ts';
import type { BackendName, BackendReport, SamplingParams } from '../../worker/common/engine.ts';
import { countParameters, forward, fuseWeights, initWeights, seededRandom, targetLogprobs, toParams } from '../../worker/model.ts';
import { devicePick, sampleToken } from '../../worker/sampler.ts';
import modelBench, { BENCH_CONFIG, QWEN2_5_0_5B } from '../model.ts';
import { engineCheck } from './engine-check.ts';
import { formatTable } from '../report.ts';
import { webgpuFeatures } from '../../worker/webgpu/device.ts';
import { holdF16Copies, type MatmulKernel, setMatmulKernel, withF16Matmuls } from '../../worker/webgpu/matmul.ts';
import { SKINNY_MAX_ROWS } from '../../worker/webgpu/product-wgsl.ts';
import { readSamples, sampleOnDevice } from '../../worker/webgpu/sample.ts';
import { allKernelChecks } from '../../worker/webgpu/testing/checks.ts';


/** H200 SXM dense fp32 (non-tensor-core) peak from NVIDIA's datasheet: WebGPU runs plain fp32 shaders. */
const H200_FP32_PEAK_GFLOPS = 67_000;

interface SelectionResult {
  report: BackendReport;
  /** Why a caller that reads synchronously (dataSync) passes this backend over, when it does. */
  syncRefusal: string | null;
  adapter: GpuAdapterInfo | null;
}

async function select(name: BackendName): Promise<SelectionResult> {
  let syncRefusal: string | null = null;
  try {
    await selectBackend(name);
  } catch (err) {
    syncRefusal = `${(err as Error).name}: ${(err as Error).message}`;
  }
  const report = await selectBackend(name, { syncReads: false });
  return { report, syncRefusal, adapter: gpuAdapterInfo() };
}

/** Best GFLOP/s of `reps` n×n×n products, each timed to its result being readable. */
async function matmulGflops(n: number, reps: number): Promise<number> {
  const a = tf.randomNormal([n, n]);
  const b = tf.randomNormal([n, n]);
  let best = Infinity;
  for (let i = 0; i < reps + 1; i++) {
    const t0 = performance.now();
    const c = tf.matMul(a, b);
    const one = tf.slice(c, [n - 1, n - 1], [1, 1]); // waits for c without timing the download of n² values
    await one.data();
    const ms = performance.now() - t0;
    if (i > 0) best = Math.min(best, ms); // the first run compiles the shader
    tf.dispose([c, one]);
  }
  tf.dispose([a, b]);
  return (2 * n ** 3) / (best / 1000) / 1e9;
}

/** Token ids of `rows` rows of `len` tokens (the same pattern as bench/model.ts). */
function tokenRows(rows: number, len: number): Int32Array {
  const ids = new Int32Array(rows * len);
  for (let r = 0; r < rows; r++) for (let i = 0; i < len; i++) ids[r * len + i] = (r * 31 + i * 7) % 256;
  return ids;
}

/**
 * Forward + backward of the mean next-token NLL over `rows` × `len` tokens, gradients for every weight except the
 * embedding table (kept out so that the numbers compare with h200-2026-11-30.json, measured when wasm's host-side
 * embedding gradient ran on every backend). No optimizer step. `mixed`: the products in mixed precision
 * (worker/webgpu/matmul.ts withF16Matmuls, the weights' f16 copies held), without loss scaling (no optimizer here).
 */
async function trainThroughput(steps: number, rows: number, len: number, mixed = false): Promise<{ tokensPerS: number; loss: number; gradChecksum: number }> {
  const cfg = BENCH_CONFIG;
  const ids = tokenRows(rows, len);
  const targets = new Int32Array(ids.length);
  for (let i = 0; i < ids.length; i++) targets[i] = (i + 1) % len === 0 ? 0 : ids[i + 1];
  const params = toParams(initWeights(cfg, 1), true);
  const vars = Object.entries(params)
    .filter(([name]) => name !== 'model.embed_tokens.weight')
    .map(([, v]) => v as tf.Variable);
  if (mixed) holdF16Copies(vars.filter((v) => v.rank === 2));
  const scoped = <T>(fn: () => T): T => (mixed ? withF16Matmuls(fn) : fn());
  const step = async (): Promise<{ loss: number; gradChecksum: number }> => {
    const { value, grads } = scoped(() => tf.variableGrads(() => tf.neg(tf.mean(targetLogprobs(forward(cfg, fuseWeights(cfg, params), ids, rows, len), targets))) as tf.Scalar, vars));
    const checksum = tf.tidy(() => tf.addN(Object.values(grads).map((g) => tf.sum(tf.abs(g)))));
    const [loss, gradChecksum] = [(await value.data())[0], (await checksum.data())[0]];
    tf.dispose([value, checksum, ...Object.values(grads)]);
    return { loss, gradChecksum };
  };
  let last = await step(); // warm-up: shader compilation on webgpu
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) last = await step();
  const ms = performance.now() - t0;
  tf.dispose(Object.values(params));
  return { tokensPerS: (steps * rows * len) / (ms / 1000), ...last };
}

/** Greedy decoding with a full forward per new token (no KV cache), `batch` sequences at once; tokens/s overall. */
async function uncachedDecode(batch: number, newTokens: number): Promise<{ tokensPerS: number; firstTokens: number[] }> {
  const cfg = BENCH_CONFIG;
  const w = fuseWeights(cfg, toParams(initWeights(cfg, 1)));
  const seqs = Array.from({ length: batch }, (_, r) => Array.from({ length: 96 }, (_, i) => (i * 13 + r) % 256));
  const next = async (): Promise<void> => {
    const t = seqs[0].length;
    const last = tf.tidy(() => {
      const logits = forward(cfg, w, Int32Array.from(seqs.flat()), batch, t).reshape([batch, t, cfg.vocab_size]);
      return tf.argMax(tf.squeeze(tf.slice(logits, [0, t - 1, 0], [batch, 1, cfg.vocab_size]), [1]), -1);
    });
    const best = await last.data();
    last.dispose();
    seqs.forEach((s, r) => s.push(best[r]));
  };
  await next(); // warm-up
  const t0 = performance.now();
  for (let i = 0; i < newTokens; i++) await next();
  const ms = performance.now() - t0;
  return { tokensPerS: (batch * newTokens) / (ms / 1000), firstTokens: seqs[0].slice(96, 104) };
}

/**
 * Matmul shapes [m, k, n] of Qwen2.5-0.5B (d 896, ff 4864, q/k/v 1152 fused): decode (1 and 32 rows), a training
 * micro-batch (1024 rows), and squares for the peak. The 151936-wide head is left out: its 545 MB weight exceeds
 * some adapters' storage-binding limit (lavapipe's is 128 MiB) and tfjs's kernel would be measured on a fallback.
 */
const KERNEL_SHAPES: [number, number, number][] = [
  [1, 896, 4864],
  [1, 4864, 896],
  [32, 896, 9728],
  [1024, 896, 1152],
  [1024, 896, 9728],
  [1024, 4864, 896],
  [2048, 2048, 2048],
  [4096, 4096, 4096],
];
const KERNEL_SHAPES_QUICK: [number, number, number][] = [
  [1, 896, 4864],
  [256, 256, 256],
];

/** Best GFLOP/s of an m×k×n product with `kernel` (timed to its result being readable; first run compiles). */
async function kernelGflops(kernel: MatmulKernel, [m, k, n]: [number, number, number], reps: number): Promise<number> {
  setMatmulKernel(kernel);
  const a = tf.randomNormal([m, k]);
  const b = tf.randomNormal([k, n]);
  let best = Infinity;
  for (let i = 0; i < reps + 1; i++) {
    const t0 = performance.now();
    // Several products per timing for the small ones: one decode-sized product is shorter than a read's latency.
    const times = m * k * n < 1e8 ? 8 : 1;
    const cs = Array.from({ length: times }, () => tf.matMul(a, b));
    const one = tf.slice(cs[times - 1], [m - 1, n - 1], [1, 1]);
    await one.data();
    const ms = (performance.now() - t0) / times;
    if (i > 0) best = Math.min(best, ms);
    tf.dispose([...cs, one]);
  }
  tf.dispose([a, b]);
  return (2 * m * k * n) / (best / 1000) / 1e9;
}

/** Sequences of the decode step whose sampling is timed, and its vocabulary (Qwen2.5's; quick: a smaller one). */
const SAMPLE_TIMING_ROWS = 8;
const SAMPLE_TIMING_VOCAB = QWEN2_5_0_5B.vocab_size;
const SAMPLE_TIMING_VOCAB_QUICK = 32_768;

/** The sampling timed: temperature alone (RL's usual: the device's cheapest non-greedy path) and with both cuts. */
const SAMPLE_TIMING_MODES: Record<string, Partial<SamplingParams>> = { plain: { temperature: 1 }, cut: { temperature: 1, topK: 50, topP: 0.9 } };

/**
 * The end of a decode step, best of `reps` ms: the batch's logits [rows, V] read back and sampled on the host
 * (sampleToken), or sampled on the device and a token and a logprob per row read back (webgpu/sample.ts). Each
 * repetition samples a fresh copy (a tensor read once is cached on the host).
 */
async function samplingTiming(vocab: number, reps: number, mode: Partial<SamplingParams>): Promise<{ hostMs: number; deviceMs: number }> {
  const s: SamplingParams = { maxTokens: 1, temperature: 1, topK: 0, topP: 1, stopTokenIds: [], stopStrings: [], topLogprobs: 0, ...mode };
  const logits = tf.tidy(() => tf.mul(tf.randomNormal([SAMPLE_TIMING_ROWS, vocab], 0, 1, 'float32', 1), 4)) as tf.Tensor2D;
  const rand = seededRandom(1);
  const best = async (step: (copy: tf.Tensor2D) => Promise<unknown>) => {
    let ms = Infinity;
    for (let r = 0; r <= reps; r++) {
      const t0 = performance.now();
      await step(tf.add(logits, 0) as tf.Tensor2D); // both paths time the same copy (the logits a step would make)
      if (r > 0) ms = Math.min(ms, performance.now() - t0); // the first run compiles
    }
    return ms;
  };
  const hostMs = await best(async (x) => {
    const data = (await x.data()) as Float32Array;
    x.dispose();
    for (let i = 0; i < SAMPLE_TIMING_ROWS; i++) sampleToken(data.subarray(i * vocab, (i + 1) * vocab), s, rand);
  });
  const deviceMs = await best(async (x) => {
    const picked = sampleOnDevice(
      x,
      Array.from({ length: SAMPLE_TIMING_ROWS }, () => devicePick(s, rand)),
    );
    x.dispose();
    await readSamples(picked);
  });
  logits.dispose();
  return { hostMs, deviceMs };
}

async function kernelsMode(quick: boolean, log: (line: string) => void): Promise<Record<string, unknown>> {
  const sel = await select('webgpu');
  const features = webgpuFeatures();
  log(`adapter ${JSON.stringify(sel.adapter)}; features ${JSON.stringify(features)}`);
  const t0 = performance.now();
  const { checks, notRun } = await allKernelChecks({ shaderF16: features?.shaderF16 ?? false, subgroups: features?.subgroups ?? false });
  const failed = checks.filter((c) => !(c.ratio <= 1));
  log(`numerics: ${checks.length - failed.length}/${checks.length} checks pass in ${((performance.now() - t0) / 1000).toFixed(1)} s${failed.length ? `; FAILED: ${failed.map((c) => `${c.name} (${c.ratio})`).join(', ')}` : ''}`);
  // The subgroup kernels differ from the tiled ones only on decode shapes (≤ 8 rows), where their shader runs.
  const subgroupKernels: MatmulKernel[] = features?.subgroups ? ['subgroup-f32', ...(features.shaderF16 ? (['subgroup-f16'] as const) : [])] : [];
  const kernels: MatmulKernel[] = ['tiled-f32', 'tfjs', ...(features?.shaderF16 ? (['tiled-f16'] as const) : []), ...subgroupKernels];
  const gflops: Record<string, number> = {};
  for (const shape of quick ? KERNEL_SHAPES_QUICK : KERNEL_SHAPES) {
    for (const k of kernels) {
      if (subgroupKernels.includes(k) && shape[0] > SKINNY_MAX_ROWS) continue;
      const g = await kernelGflops(k, shape, shape[0] * shape[1] * shape[2] >= 2 ** 33 ? 3 : 5);
      gflops[`gflops_${k.replace('-', '_')}_${shape.join('x')}`] = round(g);
      log(`matmul ${shape.join('×')} ${k}: ${g.toFixed(1)} GFLOP/s`);
    }
  }
  setMatmulKernel('tiled-f32');
  const vocab = quick ? SAMPLE_TIMING_VOCAB_QUICK : SAMPLE_TIMING_VOCAB;
  const sampling: Record<string, number> = {};
  for (const [name, mode] of Object.entries(SAMPLE_TIMING_MODES)) {
    const { hostMs, deviceMs } = await samplingTiming(vocab, quick ? 2 : 5, mode);
    log(`sampling ${SAMPLE_TIMING_ROWS} rows of ${vocab} (${JSON.stringify(mode)}): logits read + host ${hostMs.toFixed(2)} ms, on the device ${deviceMs.toFixed(2)} ms`);
    sampling[`sample_ms_${name}_logits_read_host`] = round(hostMs, 2);
    sampling[`sample_ms_${name}_device`] = round(deviceMs, 2);
  }
  const best = (k: string) => Math.max(...Object.entries(gflops).filter(([name]) => name.startsWith(`gflops_${k}_`)).map(([, v]) => v));
  return {
    adapter: sel.adapter ? `${sel.adapter.vendor} ${sel.adapter.architecture} ${sel.adapter.description}`.trim() : 'none',
    features: JSON.stringify(features),
    self_check_max_abs_error: sel.report.selfCheck.maxAbsError,
    checks_run: checks.length,
    checks_failed: failed.length === 0 ? 'none' : failed.map((c) => `${c.name}: ${c.ratio}`).join('; '),
    checks_worst_ratio: round(Math.max(...checks.map((c) => c.ratio)), 3),
    checks_not_run: notRun.join('; ') || 'none',
    matmul_gflops_best_ours_f32: best('tiled_f32'),
    matmul_gflops_best_tfjs_f32: best('tfjs'),
    ...(features?.shaderF16 ? { matmul_gflops_best_ours_f16: best('tiled_f16') } : {}),
    sample_vocab: vocab,
    sample_rows: SAMPLE_TIMING_ROWS,
    ...sampling,
    ...gflops,
  };
}

function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

async function main(): Promise<void> {
  const mode = process.argv[2] ?? 'webgpu';
  const log = (line: string) => process.stderr.write(line + '\n');
  if (mode === 'select-auto' || mode === 'select-auto-qwen') {
    // The choice the engine gets for a model given to it (measured: worker/backend-probe.ts), with every reason.
    const model = mode === 'select-auto' ? BENCH_CONFIG : QWEN2_5_0_5B;
    const report = await selectBackend(undefined, { syncReads: false, model });
    process.stdout.write(JSON.stringify({ ...report, adapter: gpuAdapterInfo() }) + '\n');
    return;
  }
  if (mode === 'engine') {
    const result = await engineCheck((process.argv[3] ?? 'wasm') as BackendName, process.argv.includes('--bench'));
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  if (mode === 'kernels') {
    const result = await kernelsMode(process.argv.includes('--quick'), log);
    process.stdout.write(formatTable(Object.entries(result).map(([metric, value]) => ({ metric, value: value as string | number }))) + '\n');
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  if (mode === 'bench-model-qwen') {
    const budget = process.argv.includes('--quick') ? ['--layers', '1', '--vocab', '8192', '--train-tokens', '32', '--budget-s', '5'] : ['--budget-s', '20'];
    const result = await modelBench({ json: true, args: ['--config', 'qwen2.5-0.5b', ...budget], log });
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  if (mode === 'bench-model') {
    const result = await modelBench({ json: true, args: [], log });
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  const sel = await select(mode as BackendName);
  log(`backend ${sel.report.name}: self-check max error ${sel.report.selfCheck.maxAbsError}; adapter ${JSON.stringify(sel.adapter)}`);
  if (sel.syncRefusal) log(`synchronous reads: ${sel.syncRefusal}`);
  // --quick: tiny sizes, to try the whole path on a software adapter (lavapipe) before spending GPU time.
  const quick = process.argv.includes('--quick');
  const sizes = quick ? [256] : mode === 'webgpu' ? [1024, 2048, 4096] : [1024];
  const gflops: Record<string, number> = {};
  for (const n of sizes) gflops[`matmul_gflops_${n}`] = round(await matmulGflops(n, n >= 4096 ? 4 : 6));
  const peak = Math.max(...Object.values(gflops));
  log(`matmul: ${JSON.stringify(gflops)}`);
  const params = countParameters(BENCH_CONFIG);
  const result: Record<string, string | number | boolean> = {
    backend: sel.report.name,
    self_check_ok: sel.report.selfCheck.ok,
    self_check_max_abs_error: sel.report.selfCheck.maxAbsError,
    reads_synchronously: sel.syncRefusal ?? 'yes',
    adapter: sel.adapter ? `${sel.adapter.vendor} ${sel.adapter.architecture} ${sel.adapter.description}`.trim() : 'none',
    params,
    ...gflops,
    matmul_gflops_peak: round(peak),
  };
  // The model code may itself read synchronously (host-side kernels): then that phase reports why it could not run.
  try {
    const train = quick ? await trainThroughput(1, 2, 32) : await trainThroughput(3, 8, BENCH_CONFIG.max_position_embeddings);
    log(`train fwd+bwd: ${train.tokensPerS.toFixed(0)} tokens/s, loss ${train.loss}`);
    result.train_fwd_bwd_tokens_per_s = round(train.tokensPerS);
    result.train_fwd_bwd_mfu = round((6 * params * train.tokensPerS) / (peak * 1e9), 3);
    if (mode === 'webgpu') result.train_fwd_bwd_mfu_vs_fp32_datasheet = round((6 * params * train.tokensPerS) / (H200_FP32_PEAK_GFLOPS * 1e9), 5);
    result.train_loss = train.loss;
    result.train_grad_checksum = round(train.gradChecksum, 3);
    if (mode === 'webgpu' && webgpuFeatures()?.shaderF16) {
      const mixed = quick ? await trainThroughput(1, 2, 32, true) : await trainThroughput(3, 8, BENCH_CONFIG.max_position_embeddings, true);
      log(`train fwd+bwd, mixed precision: ${mixed.tokensPerS.toFixed(0)} tokens/s, loss ${mixed.loss}`);
      result.train_fwd_bwd_tokens_per_s_mixed = round(mixed.tokensPerS);
      result.train_fwd_bwd_mfu_mixed = round((6 * params * mixed.tokensPerS) / (peak * 1e9), 3);
      result.train_loss_mixed = mixed.loss;
    }
  } catch (err) {
    result.train_error = `${(err as Error).name}: ${(err as Error).message}`;
  }
  try {
    const newTokens = quick ? 2 : 16;
    const one = await uncachedDecode(1, newTokens);
    const eight = await uncachedDecode(8, newTokens);
    result.decode_uncached_tokens_per_s_1 = round(one.tokensPerS);
    result.decode_uncached_tokens_per_s_8 = round(eight.tokensPerS);
    result.decode_uncached_batch_speedup_8 = round(eight.tokensPerS / one.tokensPerS, 2);
    result.decode_first_tokens = one.firstTokens.join(' ');
  } catch (err) {
    result.decode_error = `${(err as Error).name}: ${(err as Error).message}`;
  }
  process.stdout.write(formatTable(Object.entries(result).map(([metric, value]) => ({ metric, value }))) + '\n');
  process.stdout.write(JSON.stringify(result) + '\n');
}

// No top-level await: gpu-check.sh runs this file bundled as CommonJS (see there).
main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
