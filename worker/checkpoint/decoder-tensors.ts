/**
 * The tensors a Llama / Qwen2 / Qwen3 decoder checkpoint holds, in Hugging Face naming, with their shapes
 * ([out, in] for linear weights, as PyTorch stores them).
 */
import type { DecoderConfig, NamedTensor, NamedTensors } from '../common/engine.ts';
import { MissingTensorError, TensorShapeError } from './errors.ts';
import { elementCount } from './safetensors.ts';

export function decoderTensorShapes(config: DecoderConfig): Record<string, number[]> {
  const {
    hidden_size: hidden,
    head_dim: headDim,
    intermediate_size: intermediate,
    vocab_size: vocab,
  } = config;
  const qSize = config.num_attention_heads * headDim;
  const kvSize = config.num_key_value_heads * headDim;
  const shapes: Record<string, number[]> = { 'model.embed_tokens.weight': [vocab, hidden] };
  for (let layer = 0; layer < config.num_hidden_layers; layer++) {
    const p = `model.layers.${layer}`;
    shapes[`${p}.input_layernorm.weight`] = [hidden];
    shapes[`${p}.self_attn.q_proj.weight`] = [qSize, hidden];
    shapes[`${p}.self_attn.k_proj.weight`] = [kvSize, hidden];
    shapes[`${p}.self_attn.v_proj.weight`] = [kvSize, hidden];
    shapes[`${p}.self_attn.o_proj.weight`] = [hidden, qSize];
    if (config.attention_bias) {
      shapes[`${p}.self_attn.q_proj.bias`] = [qSize];
      shapes[`${p}.self_attn.k_proj.bias`] = [kvSize];
      shapes[`${p}.self_attn.v_proj.bias`] = [kvSize];
    }
    if (config.qk_norm) {
      shapes[`${p}.self_attn.q_norm.weight`] = [headDim];
      shapes[`${p}.self_attn.k_norm.weight`] = [headDim];
    }
    shapes[`${p}.post_attention_layernorm.weight`] = [hidden];
    shapes[`${p}.mlp.gate_proj.weight`] = [intermediate, hidden];
    shapes[`${p}.mlp.up_proj.weight`] = [intermediate, hidden];
    shapes[`${p}.mlp.down_proj.weight`] = [hidden, intermediate];
  }
  shapes['model.norm.weight'] = [hidden];
  if (!config.tie_word_embeddings) shapes['lm_head.weight'] = [vocab, hidden];
  return shapes;
}

/** The named tensor, checked against the expected shape; MissingTensorError / TensorShapeError otherwise. */
export function requireTensor(
  tensors: NamedTensors,
  name: string,
  expectedShape?: readonly number[],
): NamedTensor {
  const tensor = tensors[name];
  if (!tensor) throw new MissingTensorError(name);
  if (elementCount(tensor.shape) !== tensor.data.length)
    throw new TensorShapeError(name, tensor.shape, [tensor.data.length]);
  if (
    expectedShape &&
    (tensor.shape.length !== expectedShape.length ||
      tensor.shape.some((size, i) => size !== expectedShape[i]))
  ) {
    throw new TensorShapeError(name, expectedShape, tensor.shape);
  }
  return tensor;
}

/** Checks that every tensor the config calls for is present with its shape. Extra tensors are allowed. */
export function checkDecoderTensors(config: DecoderConfig, tensors: NamedTensors): void {
  for (const [name, shape] of Object.entries(decoderTensorShapes(config)))
    requireTensor(tensors, name, shape);
}
