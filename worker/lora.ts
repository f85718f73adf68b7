/**
 * LoRA (Hu et al. 2021): a frozen base weight W plus a trainable low-rank update, W' = W + (alpha/rank)·B·A with
 * A [rank, in] and B [out, rank] in Hugging Face / PEFT layout. B starts at zero, so training starts from the base.
 *
 * In memory (see model.ts on the [in, out] layout) we keep Aᵀ [in, rank] and Bᵀ [rank, out], so the update in
 * internal layout is scale·Aᵀ·Bᵀ [in, out]. The forward builds effective weights W + scale·Aᵀ·Bᵀ for the targeted
 * modules (rank·in·out extra FLOPs per module, small next to the tokens' matmuls), which keeps one forward for
 * every mode. Dropout on the adapter input is not implemented (accepted and ignored).
 *
 * Saved as a PEFT adapter: `base_model.model.<module>.lora_A.weight` / `lora_B.weight` + adapter_config.json.
 */
import * as tf from '@tensorflow/tfjs';
import { readAllFloats } from './read.ts';
import type { DecoderConfig, LoraConfig, NamedTensors } from './common/engine.ts';
import { gaussianArray, layerPrefix, LINEAR_MODULES, type Params, seededRandom, transpose2d } from './model.ts';

export class InvalidLoraConfigError extends Error {
  override name = 'InvalidLoraConfigError';
}

const MLP_MODULES = ['gate_proj', 'up_proj', 'down_proj'];

/** Adapters by base weight name ("model.layers.0.self_attn.q_proj.weight"): Aᵀ [in, rank] and Bᵀ [rank, out]. */
export interface LoraAdapters {
  scale: number;
  a: Record<string, tf.Tensor>;
  b: Record<string, tf.Tensor>;
}

export interface LoraState extends LoraAdapters {
  config: LoraConfig;
  a: Record<string, tf.Variable>;
  b: Record<string, tf.Variable>;
}

/** Base weight names the adapter targets. */
export function loraTargets(cfg: DecoderConfig, config: LoraConfig): string[] {
  if (!Number.isInteger(config.rank) || config.rank < 1) throw new InvalidLoraConfigError(`LoRA rank must be a positive integer (got ${config.rank})`);
  if (!(config.alpha > 0)) throw new InvalidLoraConfigError(`LoRA alpha must be positive (got ${config.alpha})`);
  if (config.targetModules.length === 0) throw new InvalidLoraConfigError('LoRA needs at least one target module');
  for (const m of config.targetModules) {
    if (!(LINEAR_MODULES as readonly string[]).includes(m)) throw new InvalidLoraConfigError(`unknown LoRA target module "${m}" (one of ${LINEAR_MODULES.join(', ')})`);
  }
  const names: string[] = [];
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    for (const m of config.targetModules) names.push(`${layerPrefix(i)}${MLP_MODULES.includes(m) ? 'mlp' : 'self_attn'}.${m}.weight`);
  }
  return names;
}

/** Fresh adapters: A ~ N(0, 1/in) (PEFT uses a Kaiming-uniform of similar scale), B = 0. */
export function createLora(cfg: DecoderConfig, config: LoraConfig, base: Params, seed: number): LoraState {
  const rand = seededRandom(seed ^ 0x5eed);
  const a: Record<string, tf.Variable> = {};
  const b: Record<string, tf.Variable> = {};
  for (const name of loraTargets(cfg, config)) {
    const [inp, out] = base[name].shape; // internal [in, out]
    a[name] = tf.variable(tf.tensor2d(gaussianArray(inp * config.rank, 1 / Math.sqrt(inp), rand), [inp, config.rank]), true);
    b[name] = tf.variable(tf.zeros([config.rank, out]), true);
  }
  return { config, scale: config.alpha / config.rank, a, b };
}

/** Base params with every targeted weight replaced by W + scale·Aᵀ·Bᵀ (differentiable in A and B). */
export function effectiveParams(base: Params, lora: LoraAdapters | null): Params {
  if (!lora) return base;
  const out: Params = { ...base };
  for (const name of Object.keys(lora.a)) {
    out[name] = tf.add(base[name], tf.mul(tf.matMul(lora.a[name], lora.b[name]), lora.scale));
  }
  return out;
}

export function loraVariables(lora: LoraState): tf.Variable[] {
  return Object.keys(lora.a).flatMap((n) => [lora.a[n], lora.b[n]]);
}

/** PEFT tensor names for a base weight name. */
function peftNames(name: string): { a: string; b: string } {
  const module = name.replace(/\.weight$/, '');
  return { a: `base_model.model.${module}.lora_A.weight`, b: `base_model.model.${module}.lora_B.weight` };
}

/** Adapters in PEFT layout: lora_A [rank, in], lora_B [out, rank]. */
export async function loraToPeft(lora: LoraState): Promise<NamedTensors> {
  const out: NamedTensors = {};
  const names = Object.keys(lora.a);
  const values = await readAllFloats(names.flatMap((name) => [lora.a[name], lora.b[name]]));
  names.forEach((name, i) => {
    const peft = peftNames(name);
    const [inp, r] = lora.a[name].shape;
    const [, outDim] = lora.b[name].shape;
    out[peft.a] = { shape: [r, inp], data: transpose2d(values[2 * i], inp, r) };
    out[peft.b] = { shape: [outDim, r], data: transpose2d(values[2 * i + 1], r, outDim) };
  });
  return out;
}

/** Load PEFT-layout adapter tensors into `lora` (names it does not have are an error). */
export function loadPeftIntoLora(lora: LoraState, tensors: NamedTensors): void {
  const byPeft = new Map<string, { v: tf.Variable; rows: number; cols: number }>();
  for (const name of Object.keys(lora.a)) {
    const names = peftNames(name);
    const [inp, r] = lora.a[name].shape;
    const [, outDim] = lora.b[name].shape;
    byPeft.set(names.a, { v: lora.a[name], rows: r, cols: inp });
    byPeft.set(names.b, { v: lora.b[name], rows: outDim, cols: r });
  }
  for (const [peft, t] of Object.entries(tensors)) {
    const target = byPeft.get(peft);
    if (!target) throw new InvalidLoraConfigError(`adapter tensor "${peft}" does not match this LoRA configuration`);
    if (t.shape[0] !== target.rows || t.shape[1] !== target.cols) {
      throw new InvalidLoraConfigError(`adapter tensor "${peft}" has shape [${t.shape}], expected [${target.rows},${target.cols}]`);
    }
    target.v.assign(tf.tensor2d(transpose2d(t.data, target.rows, target.cols), [target.cols, target.rows]));
  }
}

/** Fold the adapters into the base weights (internal layout, new tensors; the caller owns them). */
export function mergedParams(base: Params, lora: LoraState): Params {
  return tf.tidy(() => {
    const eff = effectiveParams(base, lora);
    const out: Params = {};
    for (const [name, t] of Object.entries(eff)) out[name] = tf.keep(t === base[name] ? t.clone() : t);
    return out;
  });
}
