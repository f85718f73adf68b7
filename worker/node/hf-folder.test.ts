import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DecoderConfig, NamedTensors } from '../common/engine.ts';
import { decoderTensorShapes } from '../checkpoint/decoder-tensors.ts';
import { peftConfigFromLora } from '../checkpoint/peft-config.ts';
import { serializeSafetensors } from '../checkpoint/safetensors.ts';
import { readModelFolder, readPeftAdapter, writeModelFolder, writePeftAdapter } from './hf-folder.ts';

const tinyConfig: DecoderConfig = {
  model_type: 'qwen3',
  vocab_size: 16,
  hidden_size: 8,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 4,
  intermediate_size: 12,
  max_position_embeddings: 64,
  rope_theta: 1_000_000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: false,
  qk_norm: true,
  attention_bias: false,
};

/** Deterministic pseudo-random weights for every tensor the config needs. */
function tinyWeights(config: DecoderConfig): NamedTensors {
  let state = 12345;
  const next = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
  const tensors: NamedTensors = {};
  for (const [name, shape] of Object.entries(decoderTensorShapes(config))) {
    tensors[name] = { shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, next) };
  }
  return tensors;
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'agentjet-hf-folder-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeConfig(config: Record<string, unknown> = { ...tinyConfig }) {
  await writeFile(join(dir, 'config.json'), JSON.stringify(config));
}

describe('model folders', () => {
  it('writes config.json and model.safetensors and reads them back bit for bit', async () => {
    const tensors = tinyWeights(tinyConfig);
    const { files } = await writeModelFolder(dir, {
      config: tinyConfig,
      tensors,
      tokenizerFiles: { 'tokenizer_config.json': '{}' },
    });
    expect(files.map((f) => f.slice(dir.length + 1)).sort()).toEqual([
      'config.json',
      'model.safetensors',
      'tokenizer_config.json',
    ]);
    expect((await readdir(dir)).sort()).toEqual([
      'config.json',
      'model.safetensors',
      'tokenizer_config.json',
    ]); // no temp files left

    const savedConfig = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    expect(savedConfig).toMatchObject({
      architectures: ['Qwen3ForCausalLM'],
      torch_dtype: 'float32',
      head_dim: 4,
    });

    const folder = await readModelFolder(dir);
    expect(folder.config).toEqual(tinyConfig);
    expect(folder.dtype).toBe('F32');
    expect(Object.keys(folder.tensors).sort()).toEqual(Object.keys(tensors).sort());
    for (const [name, tensor] of Object.entries(tensors)) {
      expect(folder.tensors[name].shape).toEqual(tensor.shape);
      expect(folder.tensors[name].data).toEqual(tensor.data);
    }
  });

  it('stores bfloat16 when asked, and reports it', async () => {
    const tensors = tinyWeights(tinyConfig);
    await writeModelFolder(dir, { config: tinyConfig, tensors, dtype: 'BF16' });
    const folder = await readModelFolder(dir);
    expect(folder.dtype).toBe('BF16');
    const original = tensors['model.norm.weight'].data;
    const stored = folder.tensors['model.norm.weight'].data;
    stored.forEach((value, i) =>
      expect(Math.abs(value - original[i])).toBeLessThanOrEqual(Math.abs(original[i]) * 2 ** -8),
    );
    expect(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')).torch_dtype).toBe('bfloat16');
  });

  it('reads sharded weights through model.safetensors.index.json', async () => {
    const tensors = tinyWeights(tinyConfig);
    const names = Object.keys(tensors);
    const shards = [names.slice(0, 10), names.slice(10)];
    const weightMap: Record<string, string> = {};
    for (const [i, shardNames] of shards.entries()) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      const shardTensors = Object.fromEntries(shardNames.map((n) => [n, tensors[n]]));
      await writeFile(join(dir, file), serializeSafetensors(shardTensors, { dtype: 'F16' }));
      for (const n of shardNames) weightMap[n] = file;
    }
    await writeFile(
      join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ metadata: { total_size: 0 }, weight_map: weightMap }),
    );
    await writeConfig();
    const folder = await readModelFolder(dir);
    expect(folder.dtype).toBe('F16');
    expect(Object.keys(folder.tensors).sort()).toEqual(names.sort());
    expect(folder.tensors['lm_head.weight'].shape).toEqual([16, 8]);
  });

  it('reports a tensor the index promises but its shard lacks, and a missing shard', async () => {
    await writeConfig();
    await writeFile(
      join(dir, 'a.safetensors'),
      serializeSafetensors({ x: { shape: [1], data: new Float32Array([1]) } }),
    );
    await writeFile(
      join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ weight_map: { x: 'a.safetensors', y: 'a.safetensors' } }),
    );
    await expect(readModelFolder(dir)).rejects.toMatchObject({
      name: 'MissingTensorError',
      tensorName: 'y',
      file: 'a.safetensors',
    });
    await writeFile(
      join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ weight_map: { x: 'b.safetensors' } }),
    );
    await expect(readModelFolder(dir)).rejects.toMatchObject({ name: 'ModelFolderError' });
    await writeFile(
      join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ weight_map: { x: '../a.safetensors' } }),
    );
    await expect(readModelFolder(dir)).rejects.toMatchObject({ name: 'ModelFolderError' });
  });

  it('names a tensor the model needs but the checkpoint lacks', async () => {
    const { ['model.layers.1.mlp.up_proj.weight']: _dropped, ...tensors } = tinyWeights(tinyConfig);
    await writeModelFolder(dir, { config: tinyConfig, tensors });
    await expect(readModelFolder(dir)).rejects.toMatchObject({
      name: 'MissingTensorError',
      tensorName: 'model.layers.1.mlp.up_proj.weight',
    });
    await expect(readModelFolder(dir, { checkTensors: false })).resolves.toMatchObject({ dtype: 'F32' });
  });

  it('names a tensor whose shape does not fit the config', async () => {
    const tensors = tinyWeights(tinyConfig);
    tensors['model.layers.0.self_attn.k_proj.weight'] = { shape: [8, 8], data: new Float32Array(64) };
    await writeModelFolder(dir, { config: tinyConfig, tensors });
    await expect(readModelFolder(dir)).rejects.toMatchObject({
      name: 'TensorShapeError',
      tensorName: 'model.layers.0.self_attn.k_proj.weight',
      expected: [4, 8],
      actual: [8, 8],
    });
  });

  it('reports missing files, bad JSON and bad configs by name', async () => {
    await expect(readModelFolder(dir)).rejects.toMatchObject({ name: 'ModelFolderError' });
    await writeFile(join(dir, 'config.json'), '{ not json');
    await expect(readModelFolder(dir)).rejects.toMatchObject({ name: 'ModelFolderError' });
    const { vocab_size: _v, ...noVocab } = tinyConfig;
    await writeConfig(noVocab);
    await expect(readModelFolder(dir)).rejects.toMatchObject({
      name: 'ModelConfigError',
      field: 'vocab_size',
    });
    await writeConfig();
    await expect(readModelFolder(dir)).rejects.toMatchObject({ name: 'ModelFolderError' }); // no weights at all
    await writeFile(join(dir, 'model.safetensors'), new Uint8Array([1, 2, 3]));
    await expect(readModelFolder(dir)).rejects.toMatchObject({ name: 'SafetensorsFormatError' });
  });

  it('overwrites an existing checkpoint in place', async () => {
    await writeModelFolder(dir, { config: tinyConfig, tensors: tinyWeights(tinyConfig) });
    const zeros = Object.fromEntries(
      Object.entries(tinyWeights(tinyConfig)).map(([n, t]) => [
        n,
        { shape: t.shape, data: new Float32Array(t.data.length) },
      ]),
    );
    await writeModelFolder(dir, { config: tinyConfig, tensors: zeros });
    const folder = await readModelFolder(dir);
    expect(folder.tensors['model.norm.weight'].data.every((v) => v === 0)).toBe(true);
  });
});

describe('PEFT adapters', () => {
  const lora = { rank: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] };
  const adapterTensors: NamedTensors = {
    'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight': {
      shape: [2, 8],
      data: Float32Array.from({ length: 16 }, (_, i) => i / 16),
    },
    'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': {
      shape: [8, 2],
      data: new Float32Array(16),
    },
  };

  it('writes adapter_config.json and adapter_model.safetensors in PEFT layout and reads them back', async () => {
    const { files } = await writePeftAdapter(dir, {
      config: peftConfigFromLora(lora, { base_model_name_or_path: 'Qwen/Qwen3-0.6B' }),
      tensors: adapterTensors,
    });
    expect(files.map((f) => f.slice(dir.length + 1)).sort()).toEqual([
      'adapter_config.json',
      'adapter_model.safetensors',
    ]);
    const saved = JSON.parse(await readFile(join(dir, 'adapter_config.json'), 'utf8'));
    expect(saved).toMatchObject({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 2,
      lora_alpha: 4,
      target_modules: ['q_proj', 'v_proj'],
      base_model_name_or_path: 'Qwen/Qwen3-0.6B',
    });
    const adapter = await readPeftAdapter(dir);
    expect(adapter.config.r).toBe(2);
    expect(adapter.tensors).toEqual(adapterTensors);
  });

  it('rejects an adapter config with a bad rank, naming the field', async () => {
    await writeFile(
      join(dir, 'adapter_config.json'),
      JSON.stringify({ r: 0, lora_alpha: 8, target_modules: ['q_proj'] }),
    );
    await expect(readPeftAdapter(dir)).rejects.toMatchObject({ name: 'ModelConfigError', field: 'r' });
    await expect(
      writePeftAdapter(dir, { config: { r: 4, lora_alpha: 8, target_modules: [] }, tensors: {} }),
    ).rejects.toMatchObject({
      name: 'ModelConfigError',
      field: 'target_modules',
    });
  });
});
