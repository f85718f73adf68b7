import { describe, expect, it } from 'vitest';
import { decoderTensorShapes, requireTensor } from './decoder-tensors.ts';
import { parseDecoderConfig, toHfConfigJson } from './hf-config.ts';

// Trimmed from the published config.json files of Qwen3-0.6B, Qwen2.5-0.5B-Instruct and TinyLlama-1.1B.
const qwen3Config = {
  architectures: ['Qwen3ForCausalLM'],
  attention_bias: false,
  head_dim: 128,
  hidden_act: 'silu',
  hidden_size: 1024,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  model_type: 'qwen3',
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  use_sliding_window: false,
  vocab_size: 151936,
};
const qwen2Config = {
  hidden_act: 'silu',
  hidden_size: 896,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  model_type: 'qwen2',
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  tie_word_embeddings: true,
  vocab_size: 151936,
};
const llamaConfig = {
  hidden_size: 2048,
  intermediate_size: 5632,
  max_position_embeddings: 2048,
  model_type: 'llama',
  num_attention_heads: 32,
  num_hidden_layers: 22,
  num_key_value_heads: 4,
  rms_norm_eps: 1e-5,
  vocab_size: 32000,
};

function configErrorField(json: unknown): string | undefined {
  try {
    parseDecoderConfig(json);
  } catch (error) {
    expect(error).toMatchObject({ name: 'ModelConfigError' });
    return (error as { field: string }).field;
  }
  return undefined;
}

describe('parseDecoderConfig', () => {
  it('reads a Qwen3 config: explicit head_dim, GQA, tied embeddings, q/k norm', () => {
    expect(parseDecoderConfig(qwen3Config)).toEqual({
      model_type: 'qwen3',
      vocab_size: 151936,
      hidden_size: 1024,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      intermediate_size: 3072,
      max_position_embeddings: 40960,
      rope_theta: 1000000,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: true,
      qk_norm: true,
      attention_bias: false,
    });
  });

  it('gives Qwen2 its q/k/v biases and derives head_dim', () => {
    expect(parseDecoderConfig(qwen2Config)).toMatchObject({
      head_dim: 64,
      attention_bias: true,
      qk_norm: false,
      num_key_value_heads: 2,
    });
  });

  it('fills Llama defaults: rope_theta 10000, untied embeddings', () => {
    expect(parseDecoderConfig(llamaConfig)).toMatchObject({
      head_dim: 64,
      rope_theta: 10000,
      tie_word_embeddings: false,
      attention_bias: false,
      qk_norm: false,
      rms_norm_eps: 1e-5,
    });
    const { num_key_value_heads: _kv, rms_norm_eps: _eps, ...minimal } = llamaConfig;
    expect(parseDecoderConfig(minimal)).toMatchObject({ num_key_value_heads: 32, rms_norm_eps: 1e-6 });
  });

  it('names the missing or mistyped field', () => {
    const { hidden_size: _hidden, ...noHidden } = llamaConfig;
    expect(configErrorField(noHidden)).toBe('hidden_size');
    expect(configErrorField({ ...llamaConfig, vocab_size: '32000' })).toBe('vocab_size');
    expect(configErrorField({ ...llamaConfig, num_hidden_layers: 2.5 })).toBe('num_hidden_layers');
    expect(configErrorField({ ...llamaConfig, tie_word_embeddings: 'yes' })).toBe('tie_word_embeddings');
    expect(configErrorField({ ...llamaConfig, num_key_value_heads: 5 })).toBe('num_key_value_heads');
    expect(configErrorField({ ...llamaConfig, model_type: 'gpt2' })).toBe('model_type');
    expect(configErrorField({ ...llamaConfig, rope_scaling: { rope_type: 'llama3', factor: 32 } })).toBe(
      'rope_scaling',
    );
    expect(configErrorField({ ...llamaConfig, hidden_act: 'gelu' })).toBe('hidden_act');
    expect(configErrorField([])).toBe('config.json');
  });

  it('writes a config.json that reads back to the same DecoderConfig', () => {
    for (const json of [qwen3Config, qwen2Config, llamaConfig]) {
      const config = parseDecoderConfig(json);
      const saved = toHfConfigJson(config, { torchDtype: 'float32' });
      expect(saved.torch_dtype).toBe('float32');
      expect(parseDecoderConfig(JSON.parse(JSON.stringify(saved)))).toEqual(config);
    }
    expect(toHfConfigJson(parseDecoderConfig(qwen3Config)).architectures).toEqual(['Qwen3ForCausalLM']);
  });
});

describe('decoder tensor layout', () => {
  it('lists every tensor with its PyTorch shape', () => {
    const tiny = parseDecoderConfig({
      ...qwen2Config,
      hidden_size: 8,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      intermediate_size: 12,
      num_hidden_layers: 1,
      vocab_size: 10,
      tie_word_embeddings: false,
    });
    const shapes = decoderTensorShapes(tiny);
    expect(shapes['model.layers.0.self_attn.k_proj.weight']).toEqual([4, 8]);
    expect(shapes['model.layers.0.self_attn.k_proj.bias']).toEqual([4]);
    expect(shapes['model.layers.0.mlp.down_proj.weight']).toEqual([8, 12]);
    expect(shapes['lm_head.weight']).toEqual([10, 8]);
    expect(Object.keys(shapes)).toHaveLength(1 + 12 + 1 + 1);
    expect(decoderTensorShapes(parseDecoderConfig(qwen3Config))['lm_head.weight']).toBeUndefined();
  });

  it('requireTensor raises MissingTensorError and TensorShapeError', () => {
    const tensors = {
      w: { shape: [2, 3], data: new Float32Array(6) },
      bad: { shape: [2, 2], data: new Float32Array(3) },
    };
    expect(requireTensor(tensors, 'w', [2, 3])).toBe(tensors.w);
    expect(() => requireTensor(tensors, 'absent')).toThrow(
      expect.objectContaining({ name: 'MissingTensorError', tensorName: 'absent' }),
    );
    expect(() => requireTensor(tensors, 'w', [3, 2])).toThrow(
      expect.objectContaining({ name: 'TensorShapeError', expected: [3, 2], actual: [2, 3] }),
    );
    expect(() => requireTensor(tensors, 'bad')).toThrow(
      expect.objectContaining({ name: 'TensorShapeError' }),
    );
  });
});
