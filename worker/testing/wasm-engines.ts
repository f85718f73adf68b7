/**
 * Engines on the wasm backend for tests of the engine's training: each made from the tiny byte config's weights of
 * a seed, every one closed after its test.
 */
import { afterEach, beforeAll } from 'vitest';
import { selectBackend } from '../backend.ts';
import type { DecoderConfig } from '../common/engine.ts';
import { createEngineFromWeights, type LocalEngine } from '../engine.ts';
import { initWeights } from '../model.ts';

/** Registers the hooks (wasm selected before the file's tests; engines closed after each) and returns the factory. */
export function wasmEngines(name: string, cfg: DecoderConfig, weightsSeed: number): () => Promise<LocalEngine> {
  const engines: LocalEngine[] = [];
  beforeAll(async () => {
    await selectBackend('wasm');
  });
  afterEach(async () => {
    for (const e of engines.splice(0)) await e.close();
  });
  return async () => {
    const e = await createEngineFromWeights({ name, config: cfg, weights: initWeights(cfg, weightsSeed), tokenizer: null, backend: 'wasm', seed: 1 });
    engines.push(e);
    return e;
  };
}
