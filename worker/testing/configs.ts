/** Tiny configs and defaults shared by the engine's tests (2 layers, width 64: fast on any backend). */
import type { DecoderConfig, SamplingParams } from '../common/engine.ts';

/** A Qwen3-style decoder over a 40-token vocabulary. */
export const tinyConfig = (over: Partial<DecoderConfig> = {}): DecoderConfig => ({
  model_type: 'qwen3',
  vocab_size: 40,
  hidden_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 16,
  intermediate_size: 96,
  max_position_embeddings: 64,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: true,
  attention_bias: false,
  ...over,
});

/** The same shape over the byte tokenizer's 264 ids, with a short context. */
export const tinyByteConfig = (over: Partial<DecoderConfig> = {}): DecoderConfig => tinyConfig({ vocab_size: 264, intermediate_size: 128, max_position_embeddings: 48, ...over });

export const sampling = (over: Partial<SamplingParams> = {}): SamplingParams => ({
  maxTokens: 10,
  temperature: 0,
  topP: 1,
  topK: 0,
  stopTokenIds: [],
  stopStrings: [],
  topLogprobs: 0,
  ...over,
});
