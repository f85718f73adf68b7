// The shared helpers: the seeded PRNG, sampling, grid points, arm names and reading an arm's runs.
import { describe, expect, it } from 'vitest';
import type { TrialOutcome } from './types.ts';
import { armName, armResult, enumerateSpace, formatParamValue, gridValues, mixSeed, nameArms, sampleParams, seededRandom, validateSpace } from './space.ts';

describe('seededRandom', () => {
  it('repeats a stream for a seed and differs for another, inside [0, 1)', () => {
    const draw = (seed: number) => Array.from({ length: 5 }, seededRandom(seed));
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7)).not.toEqual(draw(8));
    for (const x of draw(123)) expect(x >= 0 && x < 1).toBe(true);
  });
  it('mixSeed gives distinct streams per index', () => {
    expect(new Set([0, 1, 2, 3].map((i) => mixSeed(5, i))).size).toBe(4);
    expect(mixSeed(5, 0)).not.toBe(mixSeed(6, 0));
  });
});

describe('formatParamValue and armName', () => {
  it('writes short numbers, exponent form when small or large', () => {
    expect(formatParamValue(5e-4)).toBe('5e-4');
    expect(formatParamValue(0.01)).toBe('0.01');
    expect(formatParamValue(0.123456)).toBe('0.123');
    expect(formatParamValue(0.00012345)).toBe('1.23e-4');
    expect(formatParamValue(123456.7)).toBe('1.23e5');
    expect(formatParamValue(4096)).toBe('4096');
    expect(formatParamValue(true)).toBe('true');
    expect(formatParamValue('adam')).toBe('adam');
  });
  it('names by last path segment, keys sorted', () => {
    expect(armName({ 'train.learningRate': 5e-4, 'train.klCoef': 0.01 })).toBe('klCoef=0.01,learningRate=5e-4');
  });
  it('keeps full paths for knobs sharing a last segment', () => {
    expect(armName({ 'train.lr': 1e-3, 'critic.lr': 1e-2 })).toBe('critic.lr=0.01,train.lr=1e-3');
  });
  it('falls back to more digits when short names collide', () => {
    const named = nameArms([{ lr: 1.0001e-3 }, { lr: 1.0002e-3 }, { lr: 1.0001e-3 }, { lr: 1.0001e-3 }]);
    // A repeat of a named set takes the next free spelling, and only past every spelling a #n suffix.
    expect(named.map((a) => a.arm)).toEqual(['lr=1e-3', 'lr=1.0002e-3', 'lr=1.0001e-3', 'lr=1.0001e-3#2']);
  });
});

describe('sampling and grids', () => {
  it('samples inside ranges, integers integral, lists from the list', () => {
    const rand = seededRandom(1);
    for (let i = 0; i < 200; i++) {
      const p = sampleParams({ lr: { min: 1e-5, max: 1e-1, log: true }, g: { min: 2, max: 9, integer: true }, opt: { values: ['a', 'b'] } }, rand);
      expect(p.lr as number).toBeGreaterThanOrEqual(1e-5);
      expect(p.lr as number).toBeLessThanOrEqual(1e-1);
      expect(Number.isInteger(p.g)).toBe(true);
      expect(['a', 'b']).toContain(p.opt);
    }
  });
  it('log-spaces grid points and rounds integer ones', () => {
    expect(gridValues({ min: 1e-5, max: 1e-1, log: true }, 5)).toEqual([1e-5, 1e-4, 1e-3, 1e-2, 1e-1]);
    expect(gridValues({ min: 0, max: 1 }, 3)).toEqual([0, 0.5, 1]);
    expect(gridValues({ min: 1, max: 2, integer: true }, 3)).toEqual([1, 2]);
    expect(enumerateSpace({ b: { values: [1, 2] }, a: { values: ['x', 'y', 'z'] } }, 3)).toHaveLength(6);
  });
  it('rejects broken spaces', () => {
    expect(() => validateSpace({ lr: { min: 0, max: 1, log: true } })).toThrow(/log/);
    expect(() => validateSpace({ lr: { min: 2, max: 1 } })).toThrow(/min <= max/);
    expect(() => validateSpace({ opt: { values: [] } })).toThrow(/no values/);
    expect(() => validateSpace({})).toThrow(/at least one/);
  });
});

describe('armResult', () => {
  const run = (seed: number, state: TrialOutcome['state'], metric: number | null): TrialOutcome => ({ arm: 'a', params: {}, seed, steps: 4, state, metric });
  const arm = { arm: 'a', params: {} };
  it('is unfinished until every seed has ended', () => {
    expect(armResult([run(0, 'done', 1), run(1, 'running', null)], arm, 4, 2).finished).toBe(false);
    expect(armResult([run(0, 'done', 1)], arm, 4, 2).finished).toBe(false);
  });
  it('averages done seeds and ranks an all-failed arm at -Infinity', () => {
    expect(armResult([run(0, 'done', 1), run(1, 'done', 3), run(2, 'failed', null)], arm, 4, 3).metric).toBe(2);
    expect(armResult([run(0, 'failed', null), run(1, 'stopped', null)], arm, 4, 2).metric).toBe(-Infinity);
  });
});
