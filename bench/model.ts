/**
 * The trainer engine's core, timed: peak matmul throughput of the backend, training throughput and MFU, and
 * decoding with and without the KV cache, alone and batched. About a minute on a 2-core machine.
 *
 * MFU uses the 6·N·tokens rule (forward 2N + backward 4N FLOPs per token, N = all parameters); attention's
 * T-dependent FLOPs are reported separately (`train_mfu_with_attention`, adding PaLM's 12·L·d·T per token).
 * Peak = the best of several 1024³ matmuls on the same backend.
 *
 * `decode_matmul_batching_gain_8` is what batching gains on the decode step's weight matmuls alone (8 rows vs 1): where
 * the backend's single-row matmul already runs near its peak, batched decoding cannot gain much more than this.
 *
 * On a shared machine wall-clock numbers drift with the other processes' load, so the ratios are also reported by
 * this process's CPU time (`*_cpu`: the backend is single-threaded, so CPU time is the work itself).
 *
 * `--config qwen2.5-0.5b`: the engine at a real model's shapes (random weights), see realModelBench below.
 */
import * as tf from '@tensorflow/tfjs';
import { decoderTensorShapes } from '../worker/checkpoint/decoder-tensors.ts';
import type { DecoderConfig, NamedTensors, SamplingParams, TrainOptions, TrainSample } from '../worker/common/engine.ts';
import { selectBackend } from '../worker/backend.ts';
import { cannotHold } from '../worker/backend-probe.ts';
import { createEngineFromWeights } from '../worker/engine.ts';
import { countParameters, forward, fuseWeights, initWeights, toParams } from '../worker/model.ts';
import { webgpuFeatures } from '../worker/webgpu/device.ts';
import { type MatmulKernel, matmulKernel, matmulStats, setMatmulKernel } from '../worker/webgpu/matmul.ts';
import { type BenchContext, formatTable } from './report.ts';

/** The default bench model (4 layers, d=256, context 256); bench/device/gpu-check.ts measures the same one. */
export const BENCH_CONFIG: DecoderConfig = {
  model_type: 'qwen3',
  vocab_size: 264,
  hidden_size: 256,
  num_hidden_layers: 4,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  head_dim: 32,
  intermediate_size: 768,
  max_position_embeddings: 256,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: true,
  attention_bias: false,
};

const greedy = (maxTokens: number): SamplingParams => ({ maxTokens, temperature: 0, topP: 1, topK: 0, stopTokenIds: [], stopStrings: [], topLogprobs: 0 });

/** Wall-clock and CPU milliseconds of `fn`. */
async function timed<T>(fn: () => Promise<T> | T): Promise<{ value: T; wallMs: number; cpuMs: number }> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const value = await fn();
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { value, wallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/**
 * What batching can gain on the decode step's weight matmuls alone (fused qkv, o, fused gate/up, down per layer, and
 * the head): 8 × time(1-row matmuls) ÷ time(8-row matmuls). The backend's kernels bound batched decoding by this
 * much wherever matmuls are most of a step.
 */
async function matmulBatchingGain(cfg: DecoderConfig, rowsAlone: number, rowsTogether: number): Promise<{ gain: number; aloneMs: number; togetherMs: number }> {
  const d = cfg.hidden_size;
  const qkvOut = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim;
  const shapes: [number, number][] = [
    [d, qkvOut],
    [cfg.num_attention_heads * cfg.head_dim, d],
    [d, 2 * cfg.intermediate_size],
    [cfg.intermediate_size, d],
  ];
  const weights = [...Array.from({ length: cfg.num_hidden_layers }, () => shapes).flat(), [d, cfg.vocab_size] as [number, number]].map(([i, o]) => tf.randomNormal([i, o]) as tf.Tensor2D);
  const timeRows = async (rows: number): Promise<number> => {
    const inputs = weights.map((w) => tf.randomNormal([rows, w.shape[0]]) as tf.Tensor2D);
    const once = async () => {
      for (let i = 0; i < weights.length; i++) tf.matMul(inputs[i], weights[i]).dispose();
      const probe = tf.matMul(inputs[0], weights[0]); // reading one result waits for every queued matmul
      await probe.data();
      probe.dispose();
    };
    await once();
    let best = Infinity;
    for (let round = 0; round < 5; round++) {
      const t0 = performance.now();
      for (let i = 0; i < 20; i++) await once();
      best = Math.min(best, (performance.now() - t0) / 20);
    }
    inputs.forEach((t) => t.dispose());
    return best;
  };
  const aloneMs = await timeRows(rowsAlone);
  const togetherMs = await timeRows(rowsTogether);
  weights.forEach((t) => t.dispose());
  return { gain: (rowsTogether * aloneMs) / (rowsAlone * togetherMs), aloneMs, togetherMs };
}

/** Peak GFLOP/s of a 1024³ matmul, by wall clock and by CPU time (best of several). */
async function peakMatmulGflops(): Promise<{ wall: number; cpu: number }> {
  const n = 1024;
  const a = tf.randomNormal([n, n]);
  const b = tf.randomNormal([n, n]);
  let bestWall = Infinity;
  let bestCpu = Infinity;
  for (let i = 0; i < 6; i++) {
    const { wallMs, cpuMs } = await timed(async () => {
      const c = tf.matMul(a, b);
      await c.data(); // not dataSync: WebGPU under Node reads asynchronously only
      c.dispose();
    });
    bestWall = Math.min(bestWall, wallMs);
    bestCpu = Math.min(bestCpu, cpuMs);
  }
  a.dispose();
  b.dispose();
  const flops = 2 * n ** 3;
  return { wall: flops / (bestWall / 1000) / 1e9, cpu: flops / (bestCpu / 1000) / 1e9 };
}

// ---------------------------------------------------------------------------------------------------------------
// A real model's shapes: `--config qwen2.5-0.5b [--layers N] [--budget-s S]`

/** Qwen/Qwen2.5-0.5B's config.json (494M parameters, embeddings tied). */
export const QWEN2_5_0_5B: DecoderConfig = {
  model_type: 'qwen2',
  vocab_size: 151_936,
  hidden_size: 896,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  head_dim: 64,
  intermediate_size: 4864,
  max_position_embeddings: 32_768,
  rope_theta: 1_000_000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: false,
  attention_bias: true,
};

const REAL_CONFIGS: Record<string, DecoderConfig> = { 'qwen2.5-0.5b': QWEN2_5_0_5B };

/** Seconds each phase (matmul, train, decode ×1, decode ×32) may take by default: the whole run stays in minutes. */
const PHASE_BUDGET_S = 30;
/** Matmul sizes tried, doubling while one product takes under MATMUL_TARGET_MS (so a CPU stops early). */
const MATMUL_SIZES = [512, 1024, 2048, 4096];
const MATMUL_TARGET_MS = 250;
/** A training step: rows × tokens on a GPU; one short row on a CPU backend, where a step of 494M parameters is slow. */
const TRAIN_SHAPE_GPU = { rows: 4, len: 256 };
const TRAIN_SHAPE_CPU = { rows: 1, len: 32 };
/** Concurrent sequences of the batched decode figure. */
const DECODE_BATCH = 32;

export class UnknownConfigError extends Error {
  override name = 'UnknownConfigError';
}

export class ModelTooLargeError extends Error {
  override name = 'ModelTooLargeError';
}

/** Why the webgpu device cannot bind the model's largest tensor, the [V, D] embedding, or null. */
function oversizedBinding(cfg: DecoderConfig): string | null {
  const limit = (tf.backend() as unknown as { device?: GPUDevice }).device?.limits.maxStorageBufferBindingSize ?? Infinity;
  const bytes = 4 * cfg.vocab_size * cfg.hidden_size;
  return bytes > limit ? `cannot bind the ${(bytes / 2 ** 20).toFixed(0)} MiB embedding (storage bindings up to ${(limit / 2 ** 20).toFixed(0)} MiB here)` : null;
}

function argValue(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
}

/**
 * Random weights in HF layout, uniform with initWeights' std (0.02): 494M Box–Muller normals take tens of seconds
 * in JS, a xorshift fill a second or two, and throughput does not depend on the distribution.
 */
function fastWeights(cfg: DecoderConfig, seed: number): NamedTensors {
  let x = seed >>> 0 || 1;
  const half = 0.02 * Math.sqrt(3); // uniform(−h, h) has std h/√3
  const out: NamedTensors = {};
  for (const [name, shape] of Object.entries(decoderTensorShapes(cfg))) {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    if (name.endsWith('norm.weight')) data.fill(1);
    else if (!name.endsWith('.bias')) {
      for (let i = 0; i < data.length; i++) {
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        data[i] = ((x >>> 0) / 4294967296 - 0.5) * 2 * half;
      }
    }
    out[name] = { shape, data };
  }
  return out;
}

/** Best TFLOP/s of an n×n×n product at the largest n in MATMUL_SIZES that stays near MATMUL_TARGET_MS. */
async function matmulTflops(): Promise<{ tflops: number; n: number }> {
  let best = { tflops: 0, n: 0 };
  for (const n of MATMUL_SIZES) {
    const a = tf.randomNormal([n, n]);
    const b = tf.randomNormal([n, n]);
    let bestMs = Infinity;
    for (let i = 0; i < 4; i++) {
      const t0 = performance.now();
      const c = tf.matMul(a, b);
      const one = tf.slice(c, [n - 1, n - 1], [1, 1]); // waits for c without timing the download of n² values
      await one.data();
      if (i > 0) bestMs = Math.min(bestMs, performance.now() - t0); // the first compiles the shader
      tf.dispose([c, one]);
      if (performance.now() - t0 > 4 * MATMUL_TARGET_MS) break;
    }
    tf.dispose([a, b]);
    const tflops = (2 * n ** 3) / (bestMs / 1000) / 1e12;
    if (tflops > best.tflops) best = { tflops, n };
    if (bestMs > MATMUL_TARGET_MS) break;
  }
  return best;
}

/**
 * Training throughput in mixed precision (EngineInit.precision 'mixed': f16 products, f32 master weights and
 * optimizer) on a fresh engine over the same weights, samples and options as the f32 figure: a warm-up step, then
 * steps while they fit `budgetMs` (at least `minSteps`). Only on webgpu; elsewhere, or where the engine falls back
 * to f32 (no shader-f16, a failed self-check), no figure and the reason. The caller closes its f32 engine first, so
 * that two models' optimizer state never share the device.
 */
async function mixedTraining(ctx: BenchContext, backend: string, init: { name: string; config: DecoderConfig; weights: NamedTensors }, samples: TrainSample[], opts: Partial<TrainOptions>, budgetMs: number, minSteps = 1): Promise<{ tokensPerS: number | null; precision: string; skippedSteps: number }> {
  if (backend !== 'webgpu') return { tokensPerS: null, precision: `n/a (mixed precision runs on webgpu only, the backend is ${backend})`, skippedSteps: 0 };
  const engine = await createEngineFromWeights({ ...init, tokenizer: null, seed: 1, precision: 'mixed' });
  try {
    const report = engine.info.precision!;
    if (report.active !== 'mixed') return { tokensPerS: null, precision: `f32 (${report.reason})`, skippedSteps: 0 };
    let skippedSteps = (await engine.trainStep(samples, opts)).skippedStep ? 1 : 0; // warm-up: compiles the f16 shaders
    let steps = 0;
    let ms = 0;
    while (steps < minSteps || ms + ms / steps < budgetMs) {
      const step = await timed(() => engine.trainStep(samples, opts));
      ms += step.wallMs;
      steps++;
      if (step.value.skippedStep) skippedSteps++;
    }
    const tokens = samples.reduce((a, x) => a + x.tokens.length, 0);
    const tokensPerS = (steps * tokens) / (ms / 1000);
    ctx.log(`train (mixed): ${steps} steps, ${tokensPerS.toFixed(1)} tokens/s, ${skippedSteps} skipped (gradients overflowed f16)`);
    return { tokensPerS, precision: `mixed (${report.reason})`, skippedSteps };
  } finally {
    await engine.close();
  }
}

/**
 * The engine at a real model's shapes, each phase bounded by `--budget-s` (so a CPU machine gets a few figures in
 * minutes, not hours, and says how few): matmul_tflops (best kernel, f32 and f16 where the backend has them),
 * train_tokens_per_s and train_mfu (engine.trainStep, optimizer included; MFU against the best f32 matmul), the same
 * in mixed precision on webgpu (train_tokens_per_s_mixed, train_mfu_mixed: against the same f32 peak, so that the
 * two compare),
 * decode_tokens_per_s_1 and _32 (KV-cached greedy decoding, one sequence and DECODE_BATCH at once), the same with
 * the weights read as f16 copies on webgpu with shader-f16 (`*_f16_weights`), kernels_per_decode_step (tfjs
 * kernels per decode step, by tf.profile) and dispatching_kernels_per_decode_step (those that run work).
 */
async function realModelBench(ctx: BenchContext, name: string): Promise<Record<string, unknown>> {
  const base = REAL_CONFIGS[name];
  if (!base) throw new UnknownConfigError(`unknown config "${name}" (one of ${Object.keys(REAL_CONFIGS).join(', ')})`);
  // --layers and --vocab (and --train-tokens) shrink the model for a smoke run where the real one cannot fit (wasm's 4 GiB, lavapipe's
  // 128 MiB storage bindings, smaller than Qwen's 545 MB embedding); the result says which shapes ran.
  const layers = Number(argValue(ctx.args, '--layers') ?? base.num_hidden_layers);
  const vocab = Number(argValue(ctx.args, '--vocab') ?? base.vocab_size);
  const budgetMs = Number(argValue(ctx.args, '--budget-s') ?? PHASE_BUDGET_S) * 1000;
  const cfg = { ...base, num_hidden_layers: layers, vocab_size: vocab };
  const params = countParameters(cfg);
  const started = performance.now();
  const notes: string[] = [];
  ctx.log(`${name}: ${layers} layers, vocabulary ${vocab}, ${(params / 1e6).toFixed(0)}M parameters; phase budget ${budgetMs / 1000} s`);
  // The engine's own selection (once per thread), made first so that a model the backend cannot hold is refused by
  // name here instead of aborting the wasm module or computing garbage through an oversized GPU binding.
  const selected = await selectBackend(undefined, { syncReads: false, modelParameters: params });
  const refusal = cannotHold(selected.name, cfg) ?? (selected.name === 'webgpu' ? oversizedBinding(cfg) : null);
  if (refusal) throw new ModelTooLargeError(`${selected.name} ${refusal}; --layers N and --vocab N shrink the model for a smoke run`);
  const engine = await createEngineFromWeights({ name, config: cfg, weights: fastWeights(cfg, 1), tokenizer: null, seed: 1 });
  const backend = engine.info.backend.name;
  ctx.log(`backend ${backend} (${engine.info.backend.reason}), loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`);

  // Matmul: every kernel on webgpu (ours f32, tfjs's, ours f16 where shader-f16 compiles); the backend's own elsewhere.
  const matmul: Record<string, number> = {};
  const kernels: MatmulKernel[] = backend === 'webgpu' ? ['tiled-f32', 'tfjs', ...(webgpuFeatures()?.shaderF16 ? (['tiled-f16'] as const) : [])] : [];
  const chosen = matmulKernel();
  for (const k of kernels) {
    setMatmulKernel(k);
    const r = await matmulTflops();
    matmul[k] = r.tflops;
    ctx.log(`matmul ${k}: ${r.tflops.toFixed(3)} TFLOP/s at ${r.n}³`);
  }
  setMatmulKernel(chosen);
  if (kernels.length === 0) matmul[backend] = (await matmulTflops()).tflops;
  const f32 = Object.entries(matmul).filter(([k]) => k !== 'tiled-f16');
  const [bestF32Kernel, bestF32] = f32.reduce((a, b) => (b[1] > a[1] ? b : a));

  // Training: engine.trainStep (forward, backward, clipping, AdamW), warm-up first, then as many steps as fit.
  const trainTokens = argValue(ctx.args, '--train-tokens'); // one row of this many (a smoke run on a software GPU)
  const shape = trainTokens ? { rows: 1, len: Number(trainTokens) } : backend === 'webgpu' || backend === 'tensorflow-gpu' ? TRAIN_SHAPE_GPU : TRAIN_SHAPE_CPU;
  const samples = Array.from({ length: shape.rows }, (_, r) => {
    const tokens = Array.from({ length: shape.len }, (_, i) => (r * 31 + i * 7) % Math.min(1000, vocab));
    return { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map((_, i) => ((i + r) % 3) - 1), oldLogprobs: tokens.map(() => -12) };
  });
  const trainOpts = { loss: 'ppo' as const, microBatchTokens: shape.rows * shape.len, learningRate: 1e-5 };
  const warm = await timed(() => engine.trainStep(samples, trainOpts));
  let trainSteps = 0;
  let trainMs = 0;
  while (trainSteps === 0 || trainMs + trainMs / trainSteps < budgetMs) {
    if (warm.wallMs > budgetMs) break;
    trainMs += (await timed(() => engine.trainStep(samples, trainOpts))).wallMs;
    trainSteps++;
  }
  if (trainSteps === 0) {
    notes.push(`train from the warm-up step alone (${(warm.wallMs / 1000).toFixed(1)} s > budget)`);
    [trainSteps, trainMs] = [1, warm.wallMs];
  }
  const trainTokensPerS = (trainSteps * shape.rows * shape.len) / (trainMs / 1000);
  ctx.log(`train: ${trainSteps} steps of ${shape.rows}×${shape.len} tokens, ${trainTokensPerS.toFixed(1)} tokens/s`);

  // Decoding one sequence: a short warm-up sizes the measured run to the budget.
  const prompt = Array.from({ length: 16 }, (_, i) => (i * 13) % Math.min(1000, vocab));
  const probe = await engine.generate({ promptIds: prompt, sampling: greedy(3) });
  const msPerToken = probe.timings.decodeMs / Math.max(probe.tokens.length - 1, 1);
  const decodeTokens = Math.max(4, Math.min(64, Math.floor(budgetMs / Math.max(msPerToken, 1e-3))));
  /** One sequence decoding `tokens`: how many it decoded, and its tokens/s over its decode time (not its prefill). */
  const decodeAlone = async (tokens: number) => {
    const r = await engine.generate({ promptIds: prompt, sampling: greedy(tokens) });
    return { tokens: r.tokens.length, perS: r.tokens.length / (r.timings.decodeMs / 1000) };
  };
  /** DECODE_BATCH sequences decoding `tokens` each at once (short prompts: the figure is decoding), aggregate tokens/s. */
  const decodeTogether = async (tokens: number) => {
    const together = await timed(() => Promise.all(Array.from({ length: DECODE_BATCH }, (_, i) => engine.generate({ promptIds: prompt.map((t) => (t + i) % Math.min(1000, vocab)).slice(0, 8), sampling: greedy(tokens) }))));
    return together.value.reduce((a, r) => a + r.tokens.length, 0) / (together.wallMs / 1000);
  };
  const one = await decodeAlone(decodeTokens);
  const decode1 = one.perS;
  ctx.log(`decode ×1: ${one.tokens} tokens, ${decode1.toFixed(1)} tokens/s`);
  const batchTokens = Math.max(4, Math.min(32, Math.floor(decodeTokens / 2)));
  const decode32 = await decodeTogether(batchTokens);
  ctx.log(`decode ×${DECODE_BATCH}: ${batchTokens} tokens each, ${decode32.toFixed(1)} tokens/s overall`);

  // The same decoding with the weights read as f16 copies (the f16 matmul kernel, which the fused products follow):
  // half the bytes per step where decoding is bound by reading them. One sequence for a quarter of the tokens (its
  // rate excludes the prefill); the batch as many as before, since its rate includes the prefill.
  const f16Kernel = backend === 'webgpu' && webgpuFeatures()?.shaderF16 ? (webgpuFeatures()?.subgroups ? 'subgroup-f16' : 'tiled-f16') : null;
  let decodeF16: { one: number; together: number; kernel: string } | null = null;
  if (f16Kernel) {
    setMatmulKernel(f16Kernel);
    try {
      await decodeAlone(2); // the f16 copies are made here, not timed
      decodeF16 = { one: (await decodeAlone(Math.max(4, Math.floor(decodeTokens / 4)))).perS, together: await decodeTogether(batchTokens), kernel: f16Kernel };
      ctx.log(`decode with f16 weights (${f16Kernel}): ×1 ${decodeF16.one.toFixed(1)} tokens/s, ×${DECODE_BATCH} ${decodeF16.together.toFixed(1)} tokens/s`);
    } finally {
      setMatmulKernel(chosen);
    }
  }

  // Kernels per decode step: generating 3 tokens vs 1 differs by two decode steps.
  // Of those, the ones that dispatch work: not a customGrad's unnamed scope (its kernels are listed themselves), and
  // not a Reshape, which every backend answers with a view of the same data.
  const kernelsOf = async (maxTokens: number) => (await tf.profile(async () => void (await engine.generate({ promptIds: prompt, sampling: greedy(maxTokens) })))).kernels.map((k) => k.name);
  const [threeTokens, oneToken] = [await kernelsOf(3), await kernelsOf(1)];
  const kernelsPerStep = (threeTokens.length - oneToken.length) / 2;
  const dispatching = (names: string[]) => names.filter((name) => name !== '' && name !== 'Reshape').length;
  const dispatchesPerStep = (dispatching(threeTokens) - dispatching(oneToken)) / 2;
  await engine.close();
  // Half a phase's budget: the device suite's step (gpu-check.sh) gives this phase 30 s beside the others' 20 s each.
  const mixed = await mixedTraining(ctx, backend, { name, config: cfg, weights: fastWeights(cfg, 1) }, samples, trainOpts, warm.wallMs > budgetMs ? 0 : budgetMs / 2);

  const result = {
    config: name,
    layers,
    vocab,
    params,
    backend,
    backend_reason: engine.info.backend.reason,
    backend_kernels: engine.info.backend.kernels ?? 'n/a',
    matmul_tflops_f32: round(bestF32, 4),
    matmul_kernel_f32: bestF32Kernel,
    matmul_tflops_f16: matmul['tiled-f16'] === undefined ? 'n/a' : round(matmul['tiled-f16'], 4),
    ...Object.fromEntries(Object.entries(matmul).map(([k, v]) => [`matmul_tflops_${k.replace('-', '_')}`, round(v, 4)])),
    train_tokens_per_s: round(trainTokensPerS, 2),
    train_mfu: round((6 * params * trainTokensPerS) / (bestF32 * 1e12), 4),
    train_shape: `${trainSteps} steps × ${shape.rows}×${shape.len} tokens`,
    train_tokens_per_s_mixed: mixed.tokensPerS === null ? 'n/a' : round(mixed.tokensPerS, 2),
    train_mfu_mixed: mixed.tokensPerS === null ? 'n/a' : round((6 * params * mixed.tokensPerS) / (bestF32 * 1e12), 4),
    train_precision_mixed: mixed.precision,
    train_skipped_steps_mixed: mixed.skippedSteps,
    decode_tokens_per_s_1: round(decode1, 2),
    decode_tokens_per_s_32: round(decode32, 2),
    decode_tokens_measured: `${one.tokens} alone, ${batchTokens} × ${DECODE_BATCH} together`,
    decode_tokens_per_s_1_f16_weights: decodeF16 ? round(decodeF16.one, 2) : 'n/a',
    decode_tokens_per_s_32_f16_weights: decodeF16 ? round(decodeF16.together, 2) : 'n/a',
    decode_f16_kernel: decodeF16?.kernel ?? 'n/a (no shader-f16 on webgpu)',
    kernels_per_decode_step: kernelsPerStep,
    dispatching_kernels_per_decode_step: dispatchesPerStep,
    our_matmuls: `${matmulStats.tiled} tiled, ${matmulStats.skinny} skinny, ${matmulStats.f16} f16, ${matmulStats.mixed} mixed, ${matmulStats.fallback} to tfjs`,
    bounded: `each phase ≤ ${budgetMs / 1000} s${notes.length ? `; ${notes.join('; ')}` : ''}`,
    elapsed_s: round((performance.now() - started) / 1000),
  };
  process.stdout.write(formatTable(Object.entries(result).map(([metric, value]) => ({ metric, value }))) + '\n');
  return result;
}

export default async function modelBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const config = argValue(ctx.args, '--config');
  if (config) return realModelBench(ctx, config);
  const cfg = BENCH_CONFIG;
  const params = countParameters(cfg);
  const engine = await createEngineFromWeights({ name: 'bench', config: cfg, weights: initWeights(cfg, 1), tokenizer: null, seed: 1 });
  const backend = engine.info.backend.name;
  const passedOver = engine.info.backend.passedOver.map((p) => `${p.name}: ${p.reason}`).join('; ');
  ctx.log(`model: ${cfg.num_hidden_layers} layers, d=${cfg.hidden_size}, heads ${cfg.num_attention_heads}/${cfg.num_key_value_heads}, ff ${cfg.intermediate_size}, vocab ${cfg.vocab_size}, context ${cfg.max_position_embeddings}, ${(params / 1e6).toFixed(2)}M params; backend ${backend}`);

  const peak = await peakMatmulGflops();
  const gflops = peak.wall;
  ctx.log(`peak matmul: ${gflops.toFixed(1)} GFLOP/s (${peak.cpu.toFixed(1)} by CPU time)`);

  // Training: 8 rows × 256 tokens per step, one micro-batch.
  const rows = 8;
  const seqLen = cfg.max_position_embeddings;
  const samples = Array.from({ length: rows }, (_, r) => {
    const tokens = Array.from({ length: seqLen }, (_, i) => (r * 31 + i * 7) % 256);
    return { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map((_, i) => ((i + r) % 3) - 1), oldLogprobs: tokens.map(() => -5.5) };
  });
  const trainOpts = { loss: 'ppo' as const, microBatchTokens: rows * seqLen, learningRate: 1e-4 };
  await engine.trainStep(samples, trainOpts); // warm-up
  const steps = 2;
  const train = await timed(async () => {
    for (let i = 0; i < steps; i++) await engine.trainStep(samples, trainOpts);
  });
  const trainMs = train.wallMs;
  const trainTokensPerS = (steps * rows * seqLen) / (trainMs / 1000);
  const trainMfuCpu = (6 * params * ((steps * rows * seqLen) / (train.cpuMs / 1000))) / (peak.cpu * 1e9);
  const flopsPerToken = 6 * params;
  const attnFlopsPerToken = 12 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * seqLen;
  const trainMfu = (flopsPerToken * trainTokensPerS) / (gflops * 1e9);
  const trainMfuWithAttention = ((flopsPerToken + attnFlopsPerToken) * trainTokensPerS) / (gflops * 1e9);
  ctx.log(`train: ${(trainMs / steps).toFixed(0)} ms/step, ${trainTokensPerS.toFixed(0)} tokens/s`);

  // Decoding positions 96..159 of one sequence, with the KV cache (engine) and without (full forward per token).
  const prompt = Array.from({ length: 96 }, (_, i) => (i * 13) % 256);
  const newTokens = 64;
  await engine.generate({ promptIds: prompt, sampling: greedy(4) }); // warm-up
  const cached = await engine.generate({ promptIds: prompt, sampling: greedy(newTokens) });
  const cachedTps = cached.tokens.length / (cached.timings.decodeMs / 1000);

  const p = toParams(initWeights(cfg, 1));
  const w = fuseWeights(cfg, p);
  const seq = [...prompt];
  const uncachedSteps = 16;
  const t0 = performance.now();
  for (let i = 0; i < uncachedSteps; i++) {
    const logits = tf.tidy(() => tf.slice(forward(cfg, w, Int32Array.from(seq), 1, seq.length), [seq.length - 1, 0], [1, cfg.vocab_size]));
    const row = await logits.data();
    logits.dispose();
    let best = 0;
    for (let j = 1; j < row.length; j++) if (row[j] > row[best]) best = j;
    seq.push(best);
  }
  const uncachedTps = uncachedSteps / ((performance.now() - t0) / 1000);

  // Batched decoding: 8 concurrent requests vs one alone (aggregate tokens/s). Short prompts keep prefill out of
  // the comparison; best of two rounds each, interleaved, because a shared machine's load drifts.
  const batch = 8;
  const short = (i: number) => Array.from({ length: 8 }, (_, j) => (i * 17 + j * 5) % 256);
  let batchedTps = 0;
  let aloneTps = 0;
  let batchedTpsCpu = 0;
  let aloneTpsCpu = 0;
  for (let round = 0; round < 2; round++) {
    const together = await timed(() => Promise.all(Array.from({ length: batch }, (_, i) => engine.generate({ promptIds: short(i), sampling: greedy(newTokens) }))));
    const tokens = together.value.reduce((a, r) => a + r.tokens.length, 0);
    batchedTps = Math.max(batchedTps, tokens / (together.wallMs / 1000));
    batchedTpsCpu = Math.max(batchedTpsCpu, tokens / (together.cpuMs / 1000));
    const alone = await timed(() => engine.generate({ promptIds: short(0), sampling: greedy(newTokens) }));
    aloneTps = Math.max(aloneTps, alone.value.tokens.length / (alone.wallMs / 1000));
    aloneTpsCpu = Math.max(aloneTpsCpu, alone.value.tokens.length / (alone.cpuMs / 1000));
  }
  await engine.close();
  const mixed = await mixedTraining(ctx, backend, { name: 'bench', config: cfg, weights: initWeights(cfg, 1) }, samples, trainOpts, 0, steps);
  const matmuls = await matmulBatchingGain(cfg, 1, batch);
  ctx.log(`decode-step matmuls: ${matmuls.aloneMs.toFixed(2)} ms for 1 row, ${matmuls.togetherMs.toFixed(2)} ms for ${batch}`);

  const result = {
    backend,
    backend_reason: engine.info.backend.reason,
    backend_passed_over: passedOver || 'none',
    params,
    matmul_gflops: round(gflops),
    matmul_gflops_cpu: round(peak.cpu),
    train_tokens_per_s: round(trainTokensPerS),
    train_mfu: round(trainMfu, 3),
    train_mfu_with_attention: round(trainMfuWithAttention, 3),
    train_mfu_cpu: round(trainMfuCpu, 3),
    mfu_flops: '6·N per token (N = all parameters); with_attention adds 12·L·d·T',
    train_tokens_per_s_mixed: mixed.tokensPerS === null ? 'n/a' : round(mixed.tokensPerS),
    train_mfu_mixed: mixed.tokensPerS === null ? 'n/a' : round((flopsPerToken * mixed.tokensPerS) / (gflops * 1e9), 3),
    train_precision_mixed: mixed.precision,
    decode_tokens_per_s_cached: round(cachedTps),
    decode_tokens_per_s_uncached: round(uncachedTps),
    kv_cache_speedup: round(cachedTps / uncachedTps, 2),
    batched_decode_tokens_per_s_8: round(batchedTps),
    batched_decode_speedup_8: round(batchedTps / aloneTps, 2),
    batched_decode_speedup_8_cpu: round(batchedTpsCpu / aloneTpsCpu, 2),
    decode_matmul_batching_gain_8: round(matmuls.gain, 2),
    decode_matmul_ms_1_row: round(matmuls.aloneMs, 3),
    decode_matmul_ms_8_rows: round(matmuls.togetherMs, 3),
  };
  const table = Object.entries(result).map(([metric, value]) => ({ metric, value }));
  process.stdout.write(formatTable(table) + '\n');
  return result;
}

function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
