/**
 * Engines on the wasm backend for tests of the engine's training: each made from the tiny byte config's weights of
 * a seed, every one closed after its test.
 */
import { afterEach, beforeAll } from 'vitest';
import { selectBackend } from '../backend.ts';
import type { DecoderConfig } from '../common/engine.ts';
import { createEngineFromWeights, type EngineInit, type LocalEngine } from '../engine.ts';
import { initWeights } from '../model.ts';

/**
 * Registers the hooks (wasm selected before the file's tests; engines closed after each) and returns the factory,
 * which takes init fields over the defaults (LoRA, say).
 */
export function wasmEngines(name: string, cfg: DecoderConfig, weightsSeed: number): (over?: Partial<EngineInit>) => Promise<LocalEngine> {
  const engines: LocalEngine[] = [];
  beforeAll(async () => {
    await selectBackend('wasm');
  });
  afterEach(async () => {
    for (const e of engines.splice(0)) await e.close();
  });
  return async (over = {}) => {
    const e = await createEngineFromWeights({ name, config: cfg, weights: initWeights(cfg, weightsSeed), tokenizer: null, backend: 'wasm', seed: 1, ...over });
    engines.push(e);
    return e;
  };
}
