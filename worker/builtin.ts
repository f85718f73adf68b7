/**
 * The builtin models: small Llama-style decoders over the byte tokenizer's 264-token vocabulary (256 bytes +
 * ChatML/Hermes specials), so the app works with nothing downloaded.
 *
 * `builtin:NAME` loads the checkpoint shipped in worker/builtin/NAME/ when that folder holds one (config.json +
 * model.safetensors); otherwise it is randomly initialised from BUILTIN_SEED, the same weights on every machine.
 */
import { fileURLToPath } from 'node:url';
import type { DecoderConfig } from './common/engine.ts';

export class UnknownBuiltinModelError extends Error {
  override name = 'UnknownBuiltinModelError';
}

/** Fixed so that every peer starts the builtin model from identical weights. */
export const BUILTIN_SEED = 1234;

const BYTE_VOCAB = 264;

const TINY: DecoderConfig = {
  model_type: 'llama',
  vocab_size: BYTE_VOCAB,
  hidden_size: 128,
  num_hidden_layers: 2, // enough for the copying tool use needs (a previous-token head feeding an induction head)
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 32,
  intermediate_size: 384, // 3 × hidden: SwiGLU's usual ~8/3 ratio, rounded to a multiple of 128
  max_position_embeddings: 1024,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true, // the embedding is a big share of a tiny model's parameters
  // No q/k norm: it bounds attention logits by √head_dim until its gains grow, and copying a number out of a
  // prompt of a few hundred bytes needs sharp attention from the start of training.
  qk_norm: false,
  attention_bias: false,
};

/**
 * `tiny-guess`, `tiny-team` and `tiny-verifier` are `tiny` warm-started further (swarm/node/demo/pretrain.ts): on
 * games of guess the number (the multi-turn and cocktail scenarios' model), and for the team scenario's proposer and
 * verifier.
 */
export const BUILTIN_CONFIGS: Record<string, DecoderConfig> = { tiny: TINY, 'tiny-guess': TINY, 'tiny-team': TINY, 'tiny-verifier': TINY };

export function builtinConfig(name: string): DecoderConfig {
  const cfg = BUILTIN_CONFIGS[name];
  if (!cfg)
    throw new UnknownBuiltinModelError(
      `unknown builtin model "${name}" (available: ${Object.keys(BUILTIN_CONFIGS).join(', ')})`,
    );
  return { ...cfg };
}

/** Where a shipped checkpoint for a builtin model lives (it may not exist). */
export function builtinCheckpointDir(name: string): string {
  return fileURLToPath(new URL(`./builtin/${name}/`, import.meta.url));
}
