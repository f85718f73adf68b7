/**
 * Which precision the engine trains in (EngineInit.precision): 'f32' throughout, or 'mixed': on webgpu with
 * `shader-f16`, every BatchMatMul of the forward and backward reads its operands as f16 and sums in f32
 * (webgpu/matmul.ts withF16Matmuls), the master weights' f16 copies made after each optimizer step; gradients,
 * their accumulation, clipping and AdamW's state stay f32, with dynamic loss scaling (loss-scale.ts).
 *
 * Why f16 copies read by our own matmul rather than f16 tensors: tfjs has no float16 dtype, so a tensor cannot hold
 * f16 values; the one kernel that dominates a step's time and bytes (the products) is ours, so it can bind a packed
 * f16 buffer where tfjs sees a float32 tensor of half the length, and round its other operand as it stages it.
 * Activations therefore stay f32 between kernels (no memory saved there); attention, norms and the rest run in f32.
 *
 * A request for 'mixed' falls back to 'f32', with the reason in the report (ModelInfo.precision), where the backend
 * is not webgpu, the device lacks shader-f16, or the numerics self-check fails: a small model's logits, loss and
 * gradients in mixed precision on the device against f32 on the cpu backend, within MIXED_SELF_CHECK_TOLERANCE.
 */
import * as tf from '@tensorflow/tfjs';
import type { BackendReport, DecoderConfig, PrecisionReport, TrainPrecision, TrainSample } from './common/engine.ts';
import { INITIAL_LOSS_SCALE } from './loss-scale.ts';
import { forward, fuseWeights, initWeights, toParams } from './model.ts';
import { AdamW } from './optimizer.ts';
import { readAllFloats } from './read.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS } from './train.ts';
import { webgpuFeatures } from './webgpu/device.ts';
import { holdF16Copies, withF16Matmuls } from './webgpu/matmul.ts';

export class UnknownPrecisionError extends Error {
  override name = 'UnknownPrecisionError';
}

export const TRAIN_PRECISIONS: readonly TrainPrecision[] = ['f32', 'mixed'];

/**
 * Largest relative error of the self-check's logits, loss and gradients (each max |Δ| ÷ max |f32 value|, per
 * gradient tensor). Rounding each operand to f16 costs 2⁻¹¹ ≈ 4.9e-4 relative; through two layers, forward and
 * backward, the probe lands at 1.7e-4 (logits) and 1.2e-3 (gradients) on lavapipe; a wrong kernel (layout,
 * overflow, a dropped product) is off by order one. 2e-2 leaves room for a GPU's different summation order.
 */
export const MIXED_SELF_CHECK_TOLERANCE = 2e-2;

/** The self-check's model: two layers of every kind of product (NN forward, NT and TN backward), small enough for the cpu backend. */
const PROBE_CONFIG: DecoderConfig = {
  model_type: 'qwen3',
  vocab_size: 96,
  hidden_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  intermediate_size: 128,
  max_position_embeddings: 64,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: true,
  attention_bias: false,
};
const PROBE_TOKENS = 32;
const PROBE_SEED = 7;

interface ProbeResult {
  logits: Float32Array;
  loss: number;
  grads: Float32Array[];
}

/** Logits, SFT loss and its gradients of the probe model on the active backend, in mixed precision or f32. */
async function probeTrain(mixed: boolean): Promise<ProbeResult> {
  const cfg = PROBE_CONFIG;
  const tokens = Array.from({ length: PROBE_TOKENS }, (_, i) => (i * 37 + 11) % cfg.vocab_size);
  const sample: TrainSample = { tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) };
  const params = toParams(initWeights(cfg, PROBE_SEED), true);
  const trainable = Object.values(params) as tf.Variable[];
  const optimizer = new AdamW(trainable);
  const scoped = <T>(fn: () => T): T => (mixed ? withF16Matmuls(fn) : fn());
  try {
    if (mixed) holdF16Copies(trainable.filter((t) => t.rank === 2));
    const logits = tf.tidy(() => scoped(() => forward(cfg, fuseWeights(cfg, params), Int32Array.from(tokens), 1, tokens.length)));
    const state = { cfg, params, lora: null, trainable, optimizer, reference: null };
    const out = scoped(() => batchGradients(state, [sample], { ...DEFAULT_TRAIN_OPTIONS, loss: 'sft' }, mixed ? INITIAL_LOSS_SCALE : 1));
    const tensors = [logits, out.scalars[0], ...out.grads];
    const values = await readAllFloats(tensors);
    tf.dispose([...tensors, ...out.scalars.slice(1)]);
    return { logits: values[0], loss: values[1][0], grads: values.slice(2) };
  } finally {
    optimizer.dispose();
    tf.dispose(trainable);
  }
}

/** max |a − b| ÷ max |b| (Infinity where a has a non-finite value). */
function relativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    if (!Number.isFinite(a[i])) return Infinity;
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

export type MixedSelfCheck = NonNullable<PrecisionReport['selfCheck']>;

/**
 * Mixed precision on the active webgpu backend against f32 on the cpu backend (the active backend is restored).
 * Exported for the tests, which compare its errors with the tolerance's reason.
 */
export async function mixedPrecisionSelfCheck(): Promise<MixedSelfCheck> {
  const active = tf.getBackend();
  await tf.setBackend('cpu');
  let reference: ProbeResult;
  try {
    reference = await probeTrain(false);
  } finally {
    await tf.setBackend(active);
  }
  const got = await probeTrain(true);
  const logitsError = relativeError(got.logits, reference.logits);
  const lossError = relativeError([got.loss], [reference.loss]);
  const gradError = Math.max(...got.grads.map((g, i) => relativeError(g, reference.grads[i])));
  return { ok: Math.max(logitsError, lossError, gradError) <= MIXED_SELF_CHECK_TOLERANCE, logitsError, lossError, gradError };
}

/** The self-check's verdict, once per thread (the device does not change). */
let checked: Promise<MixedSelfCheck> | null = null;

/** The precision to train in for `requested` on the selected backend, and why. */
export async function choosePrecision(requested: TrainPrecision, backend: BackendReport): Promise<PrecisionReport> {
  if (!TRAIN_PRECISIONS.includes(requested)) throw new UnknownPrecisionError(`unknown precision "${requested}" (one of ${TRAIN_PRECISIONS.join(', ')})`);
  if (requested === 'f32') return { requested, active: 'f32', reason: 'requested' };
  const f32 = (reason: string, selfCheck?: MixedSelfCheck): PrecisionReport => ({ requested, active: 'f32', reason, ...(selfCheck ? { selfCheck } : {}) });
  if (backend.name !== 'webgpu' || tf.getBackend() !== 'webgpu') return f32(`mixed precision runs on webgpu only (the backend is ${backend.name})`);
  if (!webgpuFeatures()?.shaderF16) return f32('the WebGPU device lacks shader-f16');
  checked ??= mixedPrecisionSelfCheck();
  const check = await checked;
  const worst = `logits ${check.logitsError.toExponential(2)}, loss ${check.lossError.toExponential(2)}, gradients ${check.gradError.toExponential(2)}`;
  if (!check.ok) return f32(`mixed precision failed its self-check against the cpu backend (relative errors ${worst}; tolerance ${MIXED_SELF_CHECK_TOLERANCE})`, check);
  return { requested, active: 'mixed', reason: `passed its self-check against the cpu backend (relative errors ${worst})`, selfCheck: check };
}
