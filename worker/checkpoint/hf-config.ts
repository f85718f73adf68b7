/**
 * Hugging Face `config.json` ⇄ DecoderConfig, for the Llama / Qwen2 / Qwen3 decoder family.
 * Defaults follow the transformers config classes of each model type.
 */
import type { DecoderConfig } from '../common/engine.ts';
import { ModelConfigError } from './errors.ts';

export const SUPPORTED_MODEL_TYPES = ['llama', 'qwen2', 'qwen3'] as const;
export type SupportedModelType = (typeof SUPPORTED_MODEL_TYPES)[number];

const ARCHITECTURE_BY_MODEL_TYPE: Record<SupportedModelType, string> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
};

const DEFAULT_ROPE_THETA = 10_000;
const DEFAULT_RMS_NORM_EPS = 1e-6;

export function parseDecoderConfig(json: unknown): DecoderConfig {
  if (json === null || typeof json !== 'object' || Array.isArray(json))
    throw new ModelConfigError('config.json', 'is not a JSON object');
  const fields = new ConfigFields(json as Record<string, unknown>);

  const modelType = fields.string('model_type');
  if (!(SUPPORTED_MODEL_TYPES as readonly string[]).includes(modelType)) {
    throw new ModelConfigError(
      'model_type',
      `"${modelType}" is not supported (supported: ${SUPPORTED_MODEL_TYPES.join(', ')})`,
    );
  }
  // The decoder implements plain SiLU MLPs and unscaled RoPE over full attention: refuse what it would get wrong.
  const hiddenAct = fields.optionalString('hidden_act') ?? 'silu';
  if (hiddenAct !== 'silu')
    throw new ModelConfigError('hidden_act', `"${hiddenAct}" is not supported (only silu)`);
  if (fields.raw('rope_scaling') !== undefined && fields.raw('rope_scaling') !== null) {
    throw new ModelConfigError(
      'rope_scaling',
      'RoPE scaling is not supported; only configs with rope_scaling null load',
    );
  }
  if (fields.optionalBoolean('use_sliding_window') === true)
    throw new ModelConfigError('use_sliding_window', 'sliding-window attention is not supported');

  const hiddenSize = fields.positiveInteger('hidden_size');
  const numAttentionHeads = fields.positiveInteger('num_attention_heads');
  const numKeyValueHeads = fields.optionalPositiveInteger('num_key_value_heads') ?? numAttentionHeads;
  if (numAttentionHeads % numKeyValueHeads !== 0) {
    throw new ModelConfigError(
      'num_key_value_heads',
      `${numKeyValueHeads} does not divide num_attention_heads (${numAttentionHeads})`,
    );
  }
  let headDim = fields.optionalPositiveInteger('head_dim');
  if (headDim === undefined) {
    if (hiddenSize % numAttentionHeads !== 0)
      throw new ModelConfigError(
        'head_dim',
        `missing, and hidden_size ${hiddenSize} is not divisible by num_attention_heads ${numAttentionHeads}`,
      );
    headDim = hiddenSize / numAttentionHeads;
  }

  return {
    model_type: modelType,
    vocab_size: fields.positiveInteger('vocab_size'),
    hidden_size: hiddenSize,
    num_hidden_layers: fields.positiveInteger('num_hidden_layers'),
    num_attention_heads: numAttentionHeads,
    num_key_value_heads: numKeyValueHeads,
    head_dim: headDim,
    intermediate_size: fields.positiveInteger('intermediate_size'),
    max_position_embeddings: fields.positiveInteger('max_position_embeddings'),
    rope_theta: fields.optionalPositiveNumber('rope_theta') ?? DEFAULT_ROPE_THETA,
    rms_norm_eps: fields.optionalPositiveNumber('rms_norm_eps') ?? DEFAULT_RMS_NORM_EPS,
    tie_word_embeddings: fields.optionalBoolean('tie_word_embeddings') ?? false,
    // Not HF fields: they follow from the model type (our own saved configs may state them).
    qk_norm: fields.optionalBoolean('qk_norm') ?? modelType === 'qwen3',
    attention_bias: modelType === 'qwen2' ? true : (fields.optionalBoolean('attention_bias') ?? false),
  };
}

/** A config.json that transformers loads back into the same model. */
export function toHfConfigJson(
  config: DecoderConfig,
  extra: { torchDtype?: string } = {},
): Record<string, unknown> {
  const architecture = ARCHITECTURE_BY_MODEL_TYPE[config.model_type as SupportedModelType];
  if (!architecture) throw new ModelConfigError('model_type', `"${config.model_type}" is not supported`);
  const json: Record<string, unknown> = {
    architectures: [architecture],
    model_type: config.model_type,
    vocab_size: config.vocab_size,
    hidden_size: config.hidden_size,
    num_hidden_layers: config.num_hidden_layers,
    num_attention_heads: config.num_attention_heads,
    num_key_value_heads: config.num_key_value_heads,
    head_dim: config.head_dim,
    intermediate_size: config.intermediate_size,
    max_position_embeddings: config.max_position_embeddings,
    rope_theta: config.rope_theta,
    rope_scaling: null,
    rms_norm_eps: config.rms_norm_eps,
    tie_word_embeddings: config.tie_word_embeddings,
    hidden_act: 'silu',
    attention_bias: config.attention_bias,
    qk_norm: config.qk_norm,
  };
  if (extra.torchDtype) json.torch_dtype = extra.torchDtype;
  return json;
}

/** Typed reads of config fields; every failure names the field. */
class ConfigFields {
  constructor(private readonly json: Record<string, unknown>) {}

  raw(field: string): unknown {
    return this.json[field];
  }

  string(field: string): string {
    const value = this.required(field);
    if (typeof value !== 'string')
      throw new ModelConfigError(field, `must be a string, got ${describe(value)}`);
    return value;
  }

  optionalString(field: string): string | undefined {
    return this.isAbsent(field) ? undefined : this.string(field);
  }

  positiveInteger(field: string): number {
    const value = this.required(field);
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0)
      throw new ModelConfigError(field, `must be a positive integer, got ${describe(value)}`);
    return value;
  }

  optionalPositiveInteger(field: string): number | undefined {
    return this.isAbsent(field) ? undefined : this.positiveInteger(field);
  }

  optionalPositiveNumber(field: string): number | undefined {
    if (this.isAbsent(field)) return undefined;
    const value = this.json[field];
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
      throw new ModelConfigError(field, `must be a positive number, got ${describe(value)}`);
    return value;
  }

  optionalBoolean(field: string): boolean | undefined {
    if (this.isAbsent(field)) return undefined;
    const value = this.json[field];
    if (typeof value !== 'boolean')
      throw new ModelConfigError(field, `must be true or false, got ${describe(value)}`);
    return value;
  }

  private required(field: string): unknown {
    if (this.isAbsent(field)) throw new ModelConfigError(field, 'is missing');
    return this.json[field];
  }

  /** HF writes null for "use the default". */
  private isAbsent(field: string): boolean {
    return this.json[field] === undefined || this.json[field] === null;
  }
}

/** The value as an error shows it; one nested deeper than JSON.stringify's recursion goes is named by its type. */
function describe(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return Array.isArray(value) ? 'a deeply nested array' : `a deeply nested ${typeof value}`;
  }
}
