import { describe, expect, it } from 'vitest';
import { DEFAULT_TRAINING_CONFIG, resolveTrainingConfig } from './config.ts';

describe('resolveTrainingConfig', () => {
  it('applies overrides over the documented defaults, train options merged field by field', () => {
    const config = resolveTrainingConfig({ batchTasks: 8, train: { learningRate: 3e-6 } });
    expect(config.batchTasks).toBe(8);
    expect(config.groupSize).toBe(DEFAULT_TRAINING_CONFIG.groupSize);
    expect(config.train).toEqual({ ...DEFAULT_TRAINING_CONFIG.train, learningRate: 3e-6 });
    // The equivalence of merged and per-call samples holds for the token-sum loss: it is the default.
    expect(config.train.normalization).toBe('token-sum');
  });

  it('names the bad field', () => {
    for (const [overrides, field] of [
      [{ groupSize: 0 }, 'groupSize'],
      [{ train: { clipLow: 2 } }, 'train.clipLow'],
      [{ batchTaks: 2 }, undefined],
      [{ mergeMode: 'fancy' }, 'mergeMode'],
    ] as const) {
      expect(() => resolveTrainingConfig(overrides)).toThrow(expect.objectContaining({ name: 'TrainingConfigError', field }));
    }
  });
});
