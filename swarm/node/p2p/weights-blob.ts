/**
 * What a weights blob of the swarm is, and whether it fits a model. A blob is a safetensors file whose
 * `__metadata__` says what it holds (full weights, or a LoRA adapter with its config and the fingerprint of the
 * base it was trained on), so the signed, hash-verified bytes describe themselves: a replica checks them against
 * its own model before its engine is touched, and refuses with a code (`WeightsRefusedError`) what does not fit.
 *
 * Pure functions over tensors in Hugging Face naming and layout ([out, in] linear weights).
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { decoderTensorShapes } from '../../../worker/checkpoint/decoder-tensors.ts';
import { parseSafetensors, serializeSafetensors } from '../../../worker/checkpoint/safetensors.ts';
import type { DecoderConfig, LoraConfig, NamedTensors } from '../../../worker/common/engine.ts';

/** Prefix of our `__metadata__` keys, apart from HF's `format`. */
const META_PREFIX = 'agentjet.';
/** Hashed ahead of the config and tensors, so that a fingerprint cannot be mistaken for another sha256. */
const FINGERPRINT_DOMAIN = 'agentjet-base-weights-v1\n';
/** PEFT's adapter tensor names: `base_model.model.<module>.lora_A.weight`, `…lora_B.weight`. */
const PEFT_NAME = /^base_model\.model\.(.+)\.lora_([AB])\.weight$/;

/** Why a replica does not load a fetched, verified blob. */
export type RefusalCode =
  /** Not a safetensors file, or its metadata is malformed. */
  | 'invalid_blob'
  /** The blob says another model or version than its signed manifest. */
  | 'version_mismatch'
  /** Not newer than the version the replica serves. */
  | 'older_version'
  /** Tensor names or shapes do not fit the replica's model config. */
  | 'shape_mismatch'
  /** Full weights for an engine that trains LoRA adapters over a frozen base (it takes adapters only). */
  | 'kind_mismatch'
  /** A LoRA adapter trained on another base than the weights the replica would put it on (or on an unnamed base). */
  | 'lora_base_mismatch'
  /** A LoRA adapter whose rank, alpha or target modules differ from those the replica's LoRA engine holds. */
  | 'lora_config_mismatch'
  /** This peer trains the model itself: fetched versions are kept, never loaded over its own. */
  | 'trains_locally'
  /** The local model is loading or failed. */
  | 'model_not_ready'
  /** The engine refused the weights (it checks them before it changes anything). */
  | 'engine_refused';

export interface WeightsRefusal {
  code: RefusalCode;
  reason: string;
}

export class WeightsRefusedError extends Error {
  override name = 'WeightsRefusedError';
  constructor(
    readonly code: RefusalCode,
    reason: string,
  ) {
    super(reason);
  }
}

export const BlobKind = z.enum(['full', 'lora-adapter']);
export type BlobKind = z.infer<typeof BlobKind>;

const LoraMeta = z.object({
  rank: z.number().int().positive(),
  alpha: z.number().positive(),
  targetModules: z.array(z.string().min(1).max(64)).min(1).max(64),
});

/** What a blob's `__metadata__` says about it. */
export interface BlobMeta {
  kind: BlobKind;
  model: string;
  version: number;
  /** LoRA: the fingerprint (`baseFingerprint`) of the weights the adapter was trained on. */
  base?: string;
  /** LoRA: the adapter's shape and scale. */
  lora?: LoraConfig;
}

export interface DecodedBlob {
  tensors: NamedTensors;
  /** Null for a blob without our metadata (an older peer's): then its kind is read off its tensor names. */
  meta: BlobMeta | null;
  kind: BlobKind;
}

/** Full weights or an adapter as a safetensors blob (F32, bit for bit) that describes itself. */
export function encodeWeightsBlob(tensors: NamedTensors, meta: BlobMeta): Uint8Array {
  const metadata: Record<string, string> = {
    format: 'pt',
    [`${META_PREFIX}kind`]: meta.kind,
    [`${META_PREFIX}model`]: meta.model,
    [`${META_PREFIX}version`]: String(meta.version),
  };
  if (meta.base) metadata[`${META_PREFIX}base`] = meta.base;
  if (meta.lora) {
    const { rank, alpha, targetModules } = meta.lora;
    metadata[`${META_PREFIX}lora`] = JSON.stringify({ rank, alpha, targetModules });
  }
  return serializeSafetensors(tensors, { metadata });
}

/** Parses a blob; WeightsRefusedError('invalid_blob') when it is not one. */
export function decodeWeightsBlob(bytes: Uint8Array): DecodedBlob {
  let parsed;
  try {
    parsed = parseSafetensors(bytes);
  } catch (err) {
    throw new WeightsRefusedError('invalid_blob', `not a safetensors file: ${(err as Error).message}`);
  }
  const tensors: NamedTensors = {};
  for (const [name, t] of Object.entries(parsed.tensors)) tensors[name] = { shape: t.shape, data: t.data };
  const meta = readMeta(parsed.metadata);
  const kind = meta?.kind ?? (Object.keys(tensors).some((name) => PEFT_NAME.test(name)) ? 'lora-adapter' : 'full');
  return { tensors, meta, kind };
}

function readMeta(metadata: Record<string, string>): BlobMeta | null {
  const kind = metadata[`${META_PREFIX}kind`];
  if (kind === undefined) return null;
  const parsedKind = BlobKind.safeParse(kind);
  const version = Number(metadata[`${META_PREFIX}version`]);
  const model = metadata[`${META_PREFIX}model`];
  if (!parsedKind.success || !Number.isSafeInteger(version) || version < 0 || !model) {
    throw new WeightsRefusedError('invalid_blob', 'the blob metadata names no valid kind, model and version');
  }
  const meta: BlobMeta = { kind: parsedKind.data, model, version };
  const base = metadata[`${META_PREFIX}base`];
  if (base !== undefined) meta.base = base;
  const lora = metadata[`${META_PREFIX}lora`];
  if (lora !== undefined) {
    let value: unknown;
    try {
      value = JSON.parse(lora);
    } catch {
      value = undefined;
    }
    const parsed = LoraMeta.safeParse(value);
    if (!parsed.success) throw new WeightsRefusedError('invalid_blob', 'the blob metadata holds no valid LoRA config');
    meta.lora = parsed.data;
  }
  return meta;
}

/**
 * The identity of a model's base weights: sha256 over the config and every decoder tensor (names, shapes, f32 bytes),
 * in name order. Extra tensors a folder may carry (a tied lm_head) are left out, so the same weights read from a
 * folder or from an engine give the same fingerprint; a missing tensor gives null (no identity to claim).
 */
export function baseFingerprint(config: DecoderConfig, tensors: NamedTensors): string | null {
  const hash = createHash('sha256').update(FINGERPRINT_DOMAIN);
  hash.update(JSON.stringify(config, Object.keys(config).sort()));
  for (const name of Object.keys(decoderTensorShapes(config)).sort()) {
    const t = tensors[name];
    if (!t) return null;
    hash.update(`\n${name}[${t.shape.join(',')}]\n`);
    hash.update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  }
  return hash.digest('hex');
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** Full weights fit a model when they hold every decoder tensor of its config, each of its shape, and nothing else. */
export function checkFullFits(config: DecoderConfig, tensors: NamedTensors): void {
  const shapes = decoderTensorShapes(config);
  for (const [name, shape] of Object.entries(shapes)) {
    const t = tensors[name];
    if (!t) throw new WeightsRefusedError('shape_mismatch', `the blob has no ${name}`);
    if (!sameShape(t.shape, shape)) throw new WeightsRefusedError('shape_mismatch', `${name} is [${t.shape.join(', ')}], the model's is [${shape.join(', ')}]`);
  }
  // A tied model's folder may still carry lm_head; the engine holds it then, so it is not foreign.
  const tolerated = config.tie_word_embeddings ? { 'lm_head.weight': [config.vocab_size, config.hidden_size] } : {};
  for (const [name, t] of Object.entries(tensors)) {
    if (shapes[name]) continue;
    const shape = (tolerated as Record<string, number[]>)[name];
    if (!shape || !sameShape(t.shape, shape)) throw new WeightsRefusedError('shape_mismatch', `the model has no tensor ${name} [${t.shape.join(', ')}]`);
  }
}

/** One adapted weight: its base name, A [rank, in] and B [out, rank]. */
export interface AdapterPair {
  base: string;
  a: NamedTensors[string];
  b: NamedTensors[string];
}

/**
 * An adapter fits a model when every tensor is a PEFT A/B pair over one of its linear weights of a target module,
 * every target of every layer has its pair, and the shapes are [rank, in] and [out, rank]. Returns the pairs.
 */
export function checkAdapterFits(config: DecoderConfig, lora: LoraConfig, tensors: NamedTensors): AdapterPair[] {
  const shapes = decoderTensorShapes(config);
  const halves = new Map<string, { a?: NamedTensors[string]; b?: NamedTensors[string] }>();
  for (const [name, t] of Object.entries(tensors)) {
    const match = PEFT_NAME.exec(name);
    if (!match) throw new WeightsRefusedError('shape_mismatch', `${name} is not a LoRA adapter tensor`);
    const base = `${match[1]}.weight`;
    const entry = halves.get(base) ?? {};
    entry[match[2] === 'A' ? 'a' : 'b'] = t;
    halves.set(base, entry);
  }
  const targets = Object.keys(shapes).filter((name) => name.startsWith('model.layers.') && lora.targetModules.some((m) => name.endsWith(`.${m}.weight`)));
  const pairs: AdapterPair[] = [];
  for (const base of targets) {
    const half = halves.get(base);
    if (!half?.a || !half.b) throw new WeightsRefusedError('shape_mismatch', `the adapter has no lora_A/lora_B pair for ${base}`);
    const [out, inp] = shapes[base];
    if (!sameShape(half.a.shape, [lora.rank, inp]) || !sameShape(half.b.shape, [out, lora.rank])) {
      throw new WeightsRefusedError('shape_mismatch', `the adapter for ${base} is A [${half.a.shape.join(', ')}], B [${half.b.shape.join(', ')}]; the model needs [${lora.rank}, ${inp}] and [${out}, ${lora.rank}]`);
    }
    pairs.push({ base, a: half.a, b: half.b });
    halves.delete(base);
  }
  const foreign = [...halves.keys()][0];
  if (foreign) throw new WeightsRefusedError('shape_mismatch', `the adapter adapts ${foreign}, which is not a ${lora.targetModules.join('/')} weight of this model`);
  return pairs;
}

/** Whether two LoRA configs give the same adapter shapes and scale (dropout aside: it is not applied in serving). */
export function sameLora(a: LoraConfig, b: LoraConfig): boolean {
  const targets = (c: LoraConfig) => [...c.targetModules].sort().join(',');
  return a.rank === b.rank && a.alpha === b.alpha && targets(a) === targets(b);
}

/**
 * W + (alpha / rank)·B·A for one adapted weight, in f32 (HF layout: W [out, in], B [out, rank], A [rank, in]).
 * For a replica whose engine holds full weights: the same policy the trainer's LoRA engine serves.
 */
export function mergeAdapter(base: NamedTensors[string], pair: AdapterPair, lora: LoraConfig): NamedTensors[string] {
  const [out, inp] = base.shape;
  const rank = lora.rank;
  const scale = lora.alpha / lora.rank;
  const merged = new Float32Array(base.data);
  const a = pair.a.data;
  const b = pair.b.data;
  // B·A first, then scaled and added, in the order the trainer's effective weight is formed (lora.ts).
  const delta = new Float32Array(inp);
  for (let o = 0; o < out; o++) {
    delta.fill(0);
    for (let r = 0; r < rank; r++) {
      const coef = b[o * rank + r];
      if (coef === 0) continue;
      const aRow = r * inp;
      for (let i = 0; i < inp; i++) delta[i] += coef * a[aRow + i];
    }
    const row = o * inp;
    for (let i = 0; i < inp; i++) merged[row + i] += Math.fround(delta[i] * scale);
  }
  return { shape: [...base.shape], data: merged };
}
