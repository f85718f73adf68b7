/**
 * The measured part of the backend choice: which of WebGPU and the best CPU backend runs *this* model faster.
 * A WebGPU step costs its dispatches (hundreds of small GPU ops, the same whatever the model's size) plus its
 * arithmetic; a CPU step costs its arithmetic. Which wins depends on the model's shapes and on the machine (an H200
 * or lavapipe, 2 cores or 64), so it is measured, briefly, when a model is loaded:
 *
 * - decode: the forward of one token through the model (one row against every weight, the head included) — the
 *   weight-bound work of a decode step, with about a decode step's number of kernels;
 * - train: forward + backward of the mean next-token loss over PROBE_TRAIN_TOKENS tokens, gradients for every weight.
 *
 * Both run on the model's shapes with constant weights (timing does not depend on values; filling is instant where
 * random init of a 150k vocabulary takes seconds), at 1 and at 2 layers: the difference is one layer's cost and the
 * rest the embedding/head's, so the full depth is extrapolated without building it. An RL step samples about as
 * many tokens as it trains on, so the cost per token is decode + train/token, and the lower cost wins. Each backend
 * has PROBE_BUDGET_MS: past it, that backend's probe ends with what it measured (one depth, scaled to the full
 * depth: an over-estimate, fair to a backend too slow to finish a short probe; a backend still in its first forward
 * at the deadline has its training step estimated from it). The probe's logits have an exact sum (expectedLogitSum): a
 * backend that misses it computed wrongly and is passed over; a GPU whose command buffers were silently dropped
 * (zeros), or whose buffers exceed its binding limit (lavapipe's 128 MiB, under Qwen's 545 MB embedding), would
 * otherwise look fast. A CPU backend that cannot hold the model (wasm's 4 GiB) is not probed.
 */
import * as tf from '@tensorflow/tfjs';
import { decoderTensorShapes } from './checkpoint/decoder-tensors.ts';
import type { BackendName, BackendProbe, DecoderConfig } from './common/engine.ts';
import { forward, fuseWeights, isLinearWeight, type Params, targetLogprobs } from './model.ts';

/** Tokens of the probe's training step: a few rows' worth of every matmul shape, short enough for a CPU backend. */
const PROBE_TRAIN_TOKENS = 16;
/** Timed repetitions after the warm-up (which compiles shaders on WebGPU); the best counts. */
const PROBE_REPS = 2;
/** Time per backend after which its probe stops with what it measured (seconds of a model load, not minutes). */
export const PROBE_BUDGET_MS = 15_000;
/** Constant weight value: small enough that logits stay finite through any depth with norms at 1. */
const PROBE_WEIGHT = 0.01;
/** Largest relative difference of the probe's logit sum from its exact value (f32 sums over a vocabulary). */
const PROBE_LOGIT_TOLERANCE = 1e-2;
/** A training token costs about three forward tokens (backward ≈ 2× forward): the estimate when time ran out first. */
const TRAIN_PER_FORWARD_TOKEN = 3;
/**
 * wasm's memory: 4 GiB, and what training one parameter holds there: the weight, its gradient and AdamW's two moments
 * (16 bytes), plus transients (transposed copies, the tied head) measured at about a quarter more. A model over it
 * cannot train on wasm, and probing it there aborts the wasm module (seen with Qwen2.5-0.5B's 151936×896 embedding).
 */
const WASM_MEMORY_BYTES = 4 * 1024 ** 3;
const WASM_BYTES_PER_TRAINED_PARAMETER = 20;

export class ProbeDisagreementError extends Error {
  override name = 'ProbeDisagreementError';
}

/** One backend's measurement at one depth. */
interface DepthTiming {
  decodeMs: number;
  trainMs: number;
  logitSum: number;
  /** The training step was estimated from the forward (no time was left to run it). */
  estimated: boolean;
}

function probeParams(cfg: DecoderConfig): Params {
  const p: Params = {};
  for (const [name, hfShape] of Object.entries(decoderTensorShapes(cfg))) {
    // Linear weights live as [in, out] (worker/model.ts toInternal); HF shapes are [out, in].
    const shape = isLinearWeight(name) ? [hfShape[1], hfShape[0]] : hfShape;
    const value = name.endsWith('norm.weight') ? 1 : name.endsWith('.bias') ? 0 : PROBE_WEIGHT;
    p[name] = tf.variable(tf.fill(shape, value), true, `probe/${name}`);
  }
  return p;
}

/** Best of PROBE_REPS timed runs of `step` after one warm-up, or the warm-up alone once over `deadline`. */
async function bestMs(step: () => Promise<number>, deadline: number): Promise<{ ms: number; value: number }> {
  let t0 = performance.now();
  const value = await step();
  let best = performance.now() - t0;
  for (let i = 0; i < PROBE_REPS && performance.now() < deadline; i++) {
    t0 = performance.now();
    await step();
    best = Math.min(best, performance.now() - t0);
  }
  return { ms: best, value };
}

async function probeDepth(cfg: DecoderConfig, deadline: number): Promise<DepthTiming> {
  const params = probeParams(cfg);
  try {
    const decode = await bestMs(async () => {
      const logits = tf.tidy(() => tf.sum(forward(cfg, fuseWeights(cfg, params), Int32Array.of(1), 1, 1)));
      const v = (await logits.data())[0];
      logits.dispose();
      return v;
    }, deadline);
    const t = Math.min(PROBE_TRAIN_TOKENS, cfg.max_position_embeddings);
    if (performance.now() > deadline) return { decodeMs: decode.ms, trainMs: TRAIN_PER_FORWARD_TOKEN * t * decode.ms, logitSum: decode.value, estimated: true };
    const ids = Int32Array.from({ length: t }, (_, i) => (i * 7 + 1) % cfg.vocab_size);
    const targets = Int32Array.from({ length: t }, (_, i) => (i * 7 + 8) % cfg.vocab_size);
    const vars = Object.values(params) as tf.Variable[];
    const train = await bestMs(async () => {
      const { value, grads } = tf.variableGrads(() => tf.neg(tf.mean(targetLogprobs(forward(cfg, fuseWeights(cfg, params), ids, 1, t), targets))) as tf.Scalar, vars);
      const check = tf.tidy(() => tf.addN(Object.values(grads).map((g) => tf.sum(g))));
      await check.data(); // waits for every gradient
      tf.dispose([value, check, ...Object.values(grads)]);
      return 0;
    }, deadline);
    return { decodeMs: decode.ms, trainMs: train.ms, logitSum: decode.value, estimated: false };
  } finally {
    tf.dispose(Object.values(params));
  }
}

/** Measure the model on the active backend (tfjs name `tfName`, already initialised and self-checked). */
export async function probeActiveBackend(name: BackendName, cfg: DecoderConfig): Promise<BackendProbe> {
  const deadline = performance.now() + PROBE_BUDGET_MS;
  const layers = cfg.num_hidden_layers;
  const one = await probeDepth({ ...cfg, num_hidden_layers: 1 }, deadline);
  const two = layers >= 2 && performance.now() < deadline ? await probeDepth({ ...cfg, num_hidden_layers: 2 }, deadline) : null;
  const extrapolate = (get: (d: DepthTiming) => number) => {
    if (!two) return get(one) * layers; // out of budget: counts the head once per layer, an over-estimate of a slow backend
    const perLayer = Math.max(get(two) - get(one), 0);
    return Math.max(get(one) - perLayer, 0) + perLayer * layers;
  };
  const decodeMsPerToken = extrapolate((d) => d.decodeMs);
  const trainMsPerToken = extrapolate((d) => d.trainMs) / Math.min(PROBE_TRAIN_TOKENS, cfg.max_position_embeddings);
  const complete = !one.estimated && (two ? !two.estimated : layers < 2);
  const probe = { name, decodeMsPerToken, trainMsPerToken, msPerToken: decodeMsPerToken + trainMsPerToken, logitSum: one.logitSum, complete };
  checkLogits(probe, cfg);
  return probe;
}

/** Why `name` cannot run the model at all (so it is not probed), or null. */
export function cannotHold(name: BackendName, cfg: DecoderConfig): string | null {
  if (name !== 'wasm') return null;
  let params = 0;
  for (const shape of Object.values(decoderTensorShapes(cfg))) params += shape.reduce((a, b) => a * b, 1);
  const bytes = params * WASM_BYTES_PER_TRAINED_PARAMETER;
  if (bytes <= WASM_MEMORY_BYTES) return null;
  return `cannot hold the model's training state in wasm's 4 GiB (${(params / 1e6).toFixed(0)}M parameters need about ${(bytes / 1024 ** 3).toFixed(1)} GiB)`;
}

/**
 * What the probe's logits must sum to. With every weight PROBE_WEIGHT (biases 0, norms 1) each hidden vector is
 * constant across its dimensions (attention averages values that are equal at every position, whatever RoPE does to
 * q and k), so the final norm makes it all ones and each logit is hidden_size · PROBE_WEIGHT.
 */
export function expectedLogitSum(cfg: DecoderConfig): number {
  return cfg.hidden_size * PROBE_WEIGHT * cfg.vocab_size;
}

/** A backend that computed the probe wrongly (a dropped command buffer reads as zeros; a binding too large, as garbage). */
export function checkLogits(p: BackendProbe, cfg: DecoderConfig): void {
  const want = expectedLogitSum(cfg);
  if (!(Math.abs(p.logitSum - want) <= PROBE_LOGIT_TOLERANCE * want)) {
    throw new ProbeDisagreementError(`computed the probe wrongly: its logits sum to ${p.logitSum}, not ${want}`);
  }
}

/** The faster of two probed backends (both checked with checkLogits). */
export function fasterOf(gpu: BackendProbe, cpu: BackendProbe): { winner: BackendProbe; loser: BackendProbe } {
  return gpu.msPerToken < cpu.msPerToken ? { winner: gpu, loser: cpu } : { winner: cpu, loser: gpu };
}

/** "webgpu 1.23 ms/token (decode 1.0 + train 0.23)" */
export function describeProbe(p: BackendProbe): string {
  const f = (x: number) => (x >= 10 ? x.toFixed(1) : x.toPrecision(3));
  return `${p.name} ${f(p.msPerToken)} ms/token (decode ${f(p.decodeMsPerToken)} + train ${f(p.trainMsPerToken)}${p.complete ? '' : ', stopped at the probe budget'})`;
}
