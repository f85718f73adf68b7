/**
 * Found by the chaos fuzz (swarm/node/testing/fuzz/decoders.ts): a field nested deeper than a recursive writer goes
 * made the error's own description (JSON.stringify, String) overflow the stack, so a hostile or broken config.json,
 * adapter_config.json or safetensors header threw RangeError instead of the loaders' named errors.
 */
import { describe, expect, it } from 'vitest';
import { parseDecoderConfig } from './hf-config.ts';
import { parsePeftAdapterConfig } from './peft-config.ts';
import { parseSafetensors } from './safetensors.ts';

/** Past V8's recursion depth for JSON.stringify and Array.prototype.toString; JSON.parse itself reads it fine. */
const DEEP_LEVELS = 10_000;
const deep = (): unknown => JSON.parse('['.repeat(DEEP_LEVELS) + ']'.repeat(DEEP_LEVELS));

describe('config loaders given deeply nested fields', () => {
  it('config.json: a ModelConfigError naming the field', () => {
    expect(() => parseDecoderConfig({ model_type: deep() })).toThrow(expect.objectContaining({ name: 'ModelConfigError', field: 'model_type' }));
    expect(() => parseDecoderConfig({ model_type: 'llama', hidden_act: 'silu', hidden_size: deep() })).toThrow(
      expect.objectContaining({ name: 'ModelConfigError', field: 'hidden_size' }),
    );
  });

  it('adapter_config.json: a ModelConfigError naming the field', () => {
    expect(() => parsePeftAdapterConfig({ peft_type: deep(), r: 8, lora_alpha: 16, target_modules: ['q_proj'] })).toThrow(
      expect.objectContaining({ name: 'ModelConfigError', field: 'peft_type' }),
    );
  });
});

describe('safetensors headers given deeply nested fields', () => {
  it('a SafetensorsFormatError naming the tensor', () => {
    const header = new TextEncoder().encode(`{"w":{"dtype":${'['.repeat(DEEP_LEVELS)}${']'.repeat(DEEP_LEVELS)},"shape":[1],"data_offsets":[0,4]}}`);
    const file = new Uint8Array(8 + header.length + 4);
    new DataView(file.buffer).setUint32(0, header.length, true);
    file.set(header, 8);
    expect(() => parseSafetensors(file)).toThrow(expect.objectContaining({ name: 'SafetensorsFormatError', detail: expect.objectContaining({ tensor: 'w' }) }));
  });
});
