import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TrainerEngine } from '../../../worker/common/engine.ts';
import { createEngine } from '../../../worker/node/load-model.ts';
import { CHECKPOINT_META, checkpointsDir, latestCheckpoint, OPTIMIZER_FILE, readCheckpointOptimizer, readCheckpointWeights, saveCheckpoint } from './checkpoints.ts';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

function checkpointRoot(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-ckpt-'));
  dirs.push(dir);
  return checkpointsDir(dir, 'org/model:v1');
}

function writeCheckpoint(root: string, name: string, step: number | null) {
  mkdirSync(join(root, name), { recursive: true });
  if (step !== null) writeFileSync(join(root, name, CHECKPOINT_META), JSON.stringify({ model: 'm', step, policyVersion: step, time: '', metrics: {}, files: [] }));
}

describe('latestCheckpoint', () => {
  it('picks the highest complete step and skips unfinished or foreign folders', () => {
    const root = checkpointRoot();
    expect(latestCheckpoint(root)).toBeNull();
    writeCheckpoint(root, 'step-2', 2);
    writeCheckpoint(root, 'step-10', 10);
    writeCheckpoint(root, 'step-12', null); // crashed before its metadata was written
    writeCheckpoint(root, 'step-20.partial', 20);
    writeCheckpoint(root, 'notes', 99);
    expect(latestCheckpoint(root)).toMatchObject({ dir: join(root, 'step-10'), meta: { step: 10, policyVersion: 10 } });
  });

  it('keeps model names that are not folder-safe inside the checkpoints folder', () => {
    expect(checkpointRoot()).toMatch(/checkpoints\/org_model_v1$/);
  });

  it('rejects unreadable metadata with a named error', () => {
    const root = checkpointRoot();
    mkdirSync(join(root, 'step-3'), { recursive: true });
    writeFileSync(join(root, 'step-3', CHECKPOINT_META), '{ not json');
    expect(() => latestCheckpoint(root)).toThrow(expect.objectContaining({ name: 'CheckpointError' }));
  });
});

class InjectedFailure extends Error {
  override name = 'InjectedFailure';
}

describe('saveCheckpoint', () => {
  let engine: TrainerEngine;
  beforeAll(async () => {
    engine = await createEngine({ source: { kind: 'builtin', name: 'tiny' }, backend: 'wasm' });
    const tokens = [257, 104, 105, 258];
    await engine.trainStep([{ tokens, lossMask: [0, 1, 1, 1], advantages: [1, 1, 1, 1], oldLogprobs: [-5, -5, -5, -5] }], { learningRate: 1e-3 });
  });
  afterAll(() => engine.close());
  const meta = { model: 'tiny', step: 1, policyVersion: 1, time: '', metrics: { loss: 0, clipFraction: 0, kl: 0, entropy: 0, gradNorm: 0, tokens: 4, trainedTokens: 3, microBatches: 1, timeMs: 0 }, reference: null };

  it('holds the weights and the optimizer state the engine has', async () => {
    const root = checkpointRoot();
    const saved = await saveCheckpoint(engine, root, meta);
    expect(saved.meta.files).toContain(OPTIMIZER_FILE);
    expect(await readCheckpointOptimizer(saved.dir)).toEqual(await engine.getOptimizerState());
    expect(await readCheckpointWeights(saved.dir)).toEqual(await engine.getWeights());
    expect(readdirSync(root)).toEqual(['step-1']);
  });

  it('leaves nothing that could be listed when a write fails half-way', async () => {
    const root = checkpointRoot();
    // The real engine, but its optimizer state cannot be read: the weights are on disk by then.
    const failing: TrainerEngine = Object.assign(Object.create(engine) as TrainerEngine, {
      save: (dir: string) => engine.save(dir),
      getOptimizerState: () => Promise.reject(new InjectedFailure('optimizer state unavailable')),
    });
    await expect(saveCheckpoint(failing, root, meta)).rejects.toMatchObject({ name: 'InjectedFailure' });
    expect(readdirSync(root)).toEqual([]);
    expect(latestCheckpoint(root)).toBeNull();
    expect(existsSync(join(root, 'step-1.partial'))).toBe(false);
  });
});
