import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TrainerEngine, TrainSample } from '../common/engine.ts';
import { initWeights } from '../model.ts';
import { sampling, tinyByteConfig } from '../testing/configs.ts';
import { startEngine, type ThreadEngine } from './engine-client.ts';
import { createEngine } from './load-model.ts';
import { writeModelFolder } from './hf-folder.ts';

const open: TrainerEngine[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const e of open.splice(0)) await e.close();
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'agentjet-engine-'));
  dirs.push(d);
  return d;
}

/** A tiny model written as a Hugging Face folder. */
async function tinyFolder(): Promise<string> {
  const dir = await tempDir();
  const config = tinyByteConfig();
  await writeModelFolder(dir, { config, tensors: initWeights(config, 21) });
  return dir;
}

const sample = (tokens: number[]): TrainSample => ({ tokens, lossMask: tokens.map((_, i) => (i > 0 ? 1 : 0)), advantages: tokens.map(() => 1), oldLogprobs: tokens.map(() => -5) });

describe('engine in a worker thread', () => {
  // One thread for most cases: starting one costs seconds (tsx + tfjs + wasm in a fresh isolate).
  let engine: ThreadEngine;
  beforeAll(async () => {
    engine = await startEngine({ source: { kind: 'builtin', name: 'tiny' }, backend: 'wasm' });
  });
  afterAll(() => engine.close());

  it('loads builtin:tiny, streams generated tokens and trains', async () => {
    expect(engine.info.name).toBe('builtin:tiny');
    expect(engine.info.config.vocab_size).toBe(264);
    expect(engine.info.backend.name).toBe('wasm');
    const streamed: number[] = [];
    const r = await engine.generate({ promptIds: [257, 104, 105], sampling: sampling({ maxTokens: 5 }) }, (t) => streamed.push(t.id));
    expect(r.tokens.map((t) => t.id)).toEqual(streamed);
    expect(r.tokens).toHaveLength(5);
    const m = await engine.trainStep([sample([257, 104, 105, 258])], { loss: 'ppo' });
    expect(m.policyVersion).toBe(1);
    expect(engine.info.policyVersion).toBe(1);
    expect(Number.isFinite(m.loss)).toBe(true);
  });

  it('rethrows engine errors by name', async () => {
    await expect(engine.generate({ promptIds: new Array(1100).fill(97), sampling: sampling() })).rejects.toMatchObject({ name: 'ContextLengthError' });
    await expect(engine.trainStep([])).rejects.toMatchObject({ name: 'InvalidSampleError' });
    await expect(engine.setWeights({ 'model.norm.weight': { shape: [3], data: new Float32Array(3) } }, 8)).rejects.toMatchObject({ name: 'TensorShapeError' });
  });

  it('cancels a generation through an AbortSignal', async () => {
    const ac = new AbortController();
    let n = 0;
    const r = await engine.generate({ promptIds: [97], sampling: sampling({ maxTokens: 40 }) }, () => ++n === 2 && ac.abort(), ac.signal);
    expect(r.finishReason).toBe('cancelled');
    expect(r.tokens.length).toBeLessThan(40);
  });

  it("a token callback that throws fails its own call with that error, and the engine serves the next", async () => {
    class CallerBug extends Error {
      override name = 'CallerBug';
    }
    const failing = engine.generate({ promptIds: [97], sampling: sampling({ maxTokens: 20 }) }, () => {
      throw new CallerBug('the caller broke');
    });
    await expect(failing).rejects.toMatchObject({ name: 'CallerBug' });
    const next = await engine.generate({ promptIds: [97], sampling: sampling({ maxTokens: 3 }) });
    expect(next.tokens).toHaveLength(3);
  });

  it('getWeights → setWeights moves the policy to another engine', async () => {
    const w = await engine.getWeights();
    expect(w['model.layers.0.self_attn.q_proj.weight'].shape).toEqual([128, 128]);
    const other = await createEngine({ source: { kind: 'builtin', name: 'tiny' }, backend: 'wasm' });
    open.push(other);
    const seq = [[10, 20, 30, 40]];
    expect(await other.logprobs(seq)).not.toEqual(await engine.logprobs(seq)); // the thread's engine has trained
    await other.setWeights(w, 7);
    expect(other.info.policyVersion).toBe(7);
    const [a] = await other.logprobs(seq);
    const [b] = await engine.logprobs(seq);
    a.forEach((v, i) => expect(v).toBeCloseTo(b[i], 5));
  });

  it('a crashed engine thread rejects pending and later calls with EngineCrashedError', async () => {
    const doomed = await startEngine({ source: { kind: 'hf', path: await tinyFolder() }, backend: 'wasm' });
    const pending = doomed.generate({ promptIds: [97, 98], sampling: sampling({ maxTokens: 40 }) });
    doomed.crashForTest();
    await expect(pending).rejects.toMatchObject({ name: 'EngineCrashedError' });
    await expect(doomed.logprobs([[97, 98]])).rejects.toMatchObject({ name: 'EngineCrashedError' });
    await doomed.close();
  });

  it('calls after close fail with EngineClosedError', async () => {
    await engine.close();
    await expect(engine.logprobs([[1, 2]])).rejects.toMatchObject({ name: 'EngineClosedError' });
  });

  it('an unknown builtin model is refused by name', async () => {
    await expect(createEngine({ source: { kind: 'builtin', name: 'huge' } })).rejects.toMatchObject({ name: 'UnknownBuiltinModelError' });
  });
});

describe('checkpoints', () => {
  it('save → load gives identical logprobs (full model)', async () => {
    const engine = await createEngine({ source: { kind: 'hf', path: await tinyFolder() }, backend: 'wasm' });
    open.push(engine);
    await engine.trainStep([sample([1, 2, 3, 4, 5])], { learningRate: 1e-2 });
    const out = await tempDir();
    const { files } = await engine.save(out);
    expect(files.map((f) => f.split('/').pop())).toEqual(expect.arrayContaining(['config.json', 'model.safetensors']));
    const loaded = await createEngine({ source: { kind: 'hf', path: out }, backend: 'wasm' });
    open.push(loaded);
    const seq = [[10, 20, 30, 40, 50, 60]];
    expect(await loaded.logprobs(seq)).toEqual(await engine.logprobs(seq));
  });

  it('save → load gives identical logprobs (PEFT adapter)', async () => {
    const base = await tinyFolder();
    const lora = { rank: 2, alpha: 4, targetModules: ['q_proj', 'up_proj'] };
    const engine = await createEngine({ source: { kind: 'hf', path: base }, lora, backend: 'wasm' });
    open.push(engine);
    await engine.trainStep([sample([1, 2, 3, 4, 5])], { learningRate: 1e-2 });
    const out = await tempDir();
    const { files } = await engine.save(out);
    expect(files.map((f) => f.split('/').pop())).toEqual(expect.arrayContaining(['adapter_config.json', 'adapter_model.safetensors']));
    const loaded = await createEngine({ source: { kind: 'hf', path: base }, adapterPath: out, backend: 'wasm' });
    open.push(loaded);
    expect(loaded.info.lora).toMatchObject({ rank: 2, alpha: 4 });
    const seq = [[10, 20, 30, 40, 50, 60]];
    expect(await loaded.logprobs(seq)).toEqual(await engine.logprobs(seq));
  });
});
