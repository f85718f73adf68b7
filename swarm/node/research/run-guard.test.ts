/** The guardian of a study run: first-step and stall bounds, the wall-time cap, and the early-stop rules. */
import { describe, expect, it } from 'vitest';
import type { RunStep } from '../../common/api.ts';
import { RunGuard, type GuardRules } from './study-run.ts';

const rules: GuardRules = { firstStepMs: 1000, stepMs: 5000, runWallMs: 60_000, nanLoss: true, maxKl: 0.5, rewardCollapse: null, noProgressSteps: null };

function step(runStep: number, rewardMean: number, metrics: { loss?: number; kl?: number } = {}): RunStep {
  return { model: 'policy', step: runStep, runStep, runId: 'r', policyVersion: runStep, time: '', groups: 1, episodes: 2, samples: 2, rewardMean, checkpoint: null, metrics: { loss: 0.1, kl: 0.01, ...metrics } as RunStep['metrics'] };
}

function clock() {
  let now = 0;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe('the run guard', () => {
  it('fails a run with no first step in time, and one that stalls after it, both to be restarted', () => {
    const time = clock();
    const guard = new RunGuard(rules, 0, time.now);
    time.advance(900);
    expect(guard.check([])).toBeNull();
    time.advance(200);
    expect(guard.check([])).toMatchObject({ outcome: 'failed', retryable: true });

    const stalled = new RunGuard(rules, 0, time.now);
    expect(stalled.check([step(1, 0.2)])).toBeNull();
    time.advance(4000);
    expect(stalled.check([])).toBeNull();
    time.advance(1500);
    expect(stalled.check([])).toMatchObject({ outcome: 'failed', retryable: true });
  });

  it('stops a run at its wall-time cap', () => {
    const time = clock();
    const guard = new RunGuard({ ...rules, stepMs: 120_000 }, 0, time.now);
    expect(guard.check([step(1, 0.2)])).toBeNull();
    time.advance(61_000);
    expect(guard.check([step(2, 0.3)])).toMatchObject({ outcome: 'stopped' });
  });

  it('stops on a NaN loss and on a KL above the bound, with the reason', () => {
    expect(new RunGuard(rules, 0).check([step(1, 0.2, { loss: Number.NaN })])).toMatchObject({ outcome: 'stopped', reason: expect.stringContaining('loss') });
    expect(new RunGuard(rules, 0).check([step(1, 0.2), step(2, 0.2, { kl: 0.9 })])).toMatchObject({ outcome: 'stopped', reason: expect.stringContaining('KL') });
  });

  it('stops on a reward collapse and on no progress, and not before', () => {
    const collapse = new RunGuard({ ...rules, rewardCollapse: { below: 0.05, steps: 2 } }, 0);
    expect(collapse.check([step(1, 0.0), step(2, 0.0), step(3, 0.4), step(4, 0.01)])).toBeNull();
    expect(collapse.check([step(5, 0.0)])).toMatchObject({ outcome: 'stopped', reason: expect.stringContaining('collapsed') });
    const flat = new RunGuard({ ...rules, noProgressSteps: 3 }, 0);
    expect(flat.check([step(1, 0.5), step(2, 0.4), step(3, 0.5)])).toBeNull();
    expect(flat.check([step(4, 0.3)])).toMatchObject({ outcome: 'stopped', reason: expect.stringContaining('no reward above') });
  });

  it('starts counting from the step a resumed run is at', () => {
    const guard = new RunGuard(rules, 3);
    expect(guard.seenStep).toBe(3);
    guard.check([step(4, 0.2)]);
    expect(guard.seenStep).toBe(4);
  });
});
