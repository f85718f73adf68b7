import { describe, expect, it } from 'vitest';
import { BUILTIN_LEARNING_RATE, DEFAULT_TRAINING_CONFIG, defaultTrainingConfig, mergeOverrides, resolveTrainingConfig } from './config.ts';

describe('resolveTrainingConfig', () => {
  it('applies overrides over the documented defaults, train options merged field by field', () => {
    const config = resolveTrainingConfig({ batchTasks: 8, train: { learningRate: 3e-6 } });
    expect(config.batchTasks).toBe(8);
    expect(config.groupSize).toBe(DEFAULT_TRAINING_CONFIG.groupSize);
    expect(config.train).toEqual({ ...DEFAULT_TRAINING_CONFIG.train, learningRate: 3e-6 });
    // The equivalence of merged and per-call samples holds for the token-sum loss: it is the default.
    expect(config.train.normalization).toBe('token-sum');
  });

  it('names the bad key and what it accepts', () => {
    for (const [overrides, field, allowed] of [
      [{ groupSize: 1 }, 'groupSize', 'at least 2'],
      [{ train: { clipLow: 2 } }, 'train.clipLow', 'at most 1'],
      [{ train: { learningRate: 1e4 } }, 'train.learningRate', 'at most 1'],
      [{ batchTasks: 2.5 }, 'batchTasks', 'an integer'],
      [{ mergeMode: 'fancy' }, 'mergeMode', 'one of "merged", "naive"'],
      [{ lora: { rank: 0, alpha: 16, targetModules: ['q_proj'] } }, 'lora.rank', 'at least 1'],
      [{ train: { miniBatches: 0 } }, 'train.miniBatches', 'at least 1'],
      // Each within bounds, together more updates than a step may make.
      [{ train: { miniBatches: 16, epochs: 8 } }, 'train.epochs', 'at most 64 together'],
    ] as const) {
      expect(() => resolveTrainingConfig(overrides)).toThrow(expect.objectContaining({ name: 'TrainingConfigError', field, allowed }));
    }
  });

  it('names an unknown key and lists the known ones', () => {
    expect(() => resolveTrainingConfig({ batchTaks: 2 })).toThrow(
      expect.objectContaining({ name: 'TrainingConfigError', field: 'batchTaks', allowed: expect.stringContaining('batchTasks') }),
    );
    // A train option written at the top level is still an unknown key there, and the known ones are listed.
    expect(() => resolveTrainingConfig({ learningRate: 1e-4 })).toThrow(expect.objectContaining({ field: 'learningRate', allowed: expect.stringContaining('train') }));
  });

  it('gives the built-in models the settings they learn at, LoRA a higher rate', () => {
    expect(defaultTrainingConfig({ kind: 'builtin', name: 'tiny' }, false).train.learningRate).toBe(BUILTIN_LEARNING_RATE);
    expect(defaultTrainingConfig({ kind: 'hf', path: '/m' }, false).train.learningRate).toBe(DEFAULT_TRAINING_CONFIG.train.learningRate);
    expect(defaultTrainingConfig({ kind: 'hf', path: '/m' }, true).train.learningRate).toBeGreaterThan(DEFAULT_TRAINING_CONFIG.train.learningRate);
  });

  it('lays per-model overrides over global ones key by key', () => {
    const merged = mergeOverrides({ groupSize: 8, train: { learningRate: 1e-4, klCoef: 0.1 } }, { train: { learningRate: 3e-4 } });
    expect(merged).toEqual({ groupSize: 8, train: { learningRate: 3e-4, klCoef: 0.1 } });
  });
});
