import { describe, expect, it } from 'vitest';
import type { StatusPayload, TrainStepSummary } from '../../../../swarm/common/api.ts';
import { createAppStore } from '../index.ts';
import { modelsSelectors } from './selectors.ts';
import type { TrainingLoopState } from './slice.ts';

function step(n: number, extra: Pick<TrainStepSummary, 'rewardStd' | 'successRate' | 'naiveTokens'> = {}): TrainStepSummary {
  return {
    model: 'tiny',
    step: n,
    policyVersion: n + 1,
    time: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(),
    groups: 2,
    episodes: 8,
    samples: 4,
    rewardMean: n / 10,
    metrics: {
      loss: 1 / (n + 1),
      clipFraction: 0.1,
      kl: 0.01 * n,
      entropy: 2,
      gradNorm: 1,
      tokens: 2000,
      trainedTokens: 500,
      microBatches: 1,
      timeMs: 500,
    },
    checkpoint: n % 10 === 0 ? `/data/checkpoints/tiny/step-${n}` : null,
    ...extra,
  };
}

describe('models slice', () => {
  it('appends steps in order and ignores ones it already holds (poll and event may overlap)', () => {
    const store = createAppStore();
    store.getState().trainStepsReceived('tiny', [step(2), step(1)]);
    store.getState().trainStepsReceived('tiny', [step(2), step(3)]);
    const training = modelsSelectors.training(store.getState().models, 'tiny');
    expect(training.steps.map((s) => s.step)).toEqual([1, 2, 3]);
    expect(training.stepsVersion).toBe(2);
    expect(modelsSelectors.lastStep(training)).toBe(3);
  });

  it('appends a pushed step only after the history it follows: a missed step is left to the next fetch', () => {
    const store = createAppStore();
    const steps = () => modelsSelectors.training(store.getState().models, 'tiny').steps.map((s) => s.step);
    // The view has not fetched the history yet: step 5 alone would hide steps 1–4 for good.
    store.getState().trainStepPushed(step(5));
    expect(steps()).toEqual([]);
    store.getState().trainStepsReceived('tiny', [step(1), step(2), step(3), step(4), step(5)]);
    store.getState().trainStepPushed(step(6));
    expect(steps()).toEqual([1, 2, 3, 4, 5, 6]);
    // Step 7 was missed (the stream was down): 8 waits for the fetch after 6, which brings both.
    store.getState().trainStepPushed(step(8));
    expect(steps()).toEqual([1, 2, 3, 4, 5, 6]);
    // Seen all the same: the view refetches the loop's state and the missing steps on it.
    expect(modelsSelectors.training(store.getState().models, 'tiny').lastPushedStep).toBe(8);
    store.getState().trainStepsReceived('tiny', [step(7), step(8)]);
    expect(steps()).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('takes the first pushed step of a model whose history is empty', () => {
    const store = createAppStore();
    store.getState().trainStepsReceived('tiny', []);
    store.getState().trainStepPushed(step(1));
    expect(modelsSelectors.training(store.getState().models, 'tiny').steps.map((s) => s.step)).toEqual([1]);
  });

  it('asks for the training state again when the pushed status moves (a step, an episode), not on every status', () => {
    const model = { name: 'tiny', source: 'builtin:tiny', engineState: 'idle' as const, policyVersion: 1, step: 1, backend: 'wasm', pool: { active: 2, limit: 8 } };
    const status = (over: Partial<typeof model>, episodes = 10) =>
      ({ models: [{ ...model, ...over }], store: { path: '/d', schemaVersion: 5, episodes } }) as unknown as StatusPayload;
    const key = (s: StatusPayload) => modelsSelectors.trainingChangeKey(s, 'tiny');
    expect(key(status({}))).toBe(key(status({})));
    expect(key(status({ step: 2 }))).not.toBe(key(status({})));
    expect(key(status({ pool: { active: 1, limit: 8 } }))).not.toBe(key(status({})));
    expect(key(status({}, 11))).not.toBe(key(status({})));
    expect(modelsSelectors.trainingChangeKey(status({}), 'other')).toBe('');
  });

  it('gives a stable empty training record for an unknown model', () => {
    const store = createAppStore();
    expect(modelsSelectors.training(store.getState().models, 'x')).toBe(
      modelsSelectors.training(store.getState().models, null),
    );
  });
});

describe('training panel', () => {
  const state = (status: TrainingLoopState['status'], checkpointEvery = 10): TrainingLoopState => ({
    model: 'tiny',
    status,
    step: 3,
    policyVersion: 4,
    engineState: 'idle',
    queuedEpisodes: 0,
    completeGroups: 0,
    lastError: null,
    config: { batchTasks: 4, groupSize: 4, checkpointEvery, maxSteps: 0 },
  });

  it('makes Start the primary action only when starting is what comes next', () => {
    expect(modelsSelectors.startIsNext(state('running'))).toBe(false);
    expect(modelsSelectors.startIsNext(state('finished'))).toBe(false);
    expect(modelsSelectors.startIsNext(null)).toBe(false);
    for (const status of ['stopped', 'paused', 'failed'] as const) expect(modelsSelectors.startIsNext(state(status))).toBe(true);
  });

  it('says checkpoints are off rather than "one every 0 steps"', () => {
    expect(modelsSelectors.noCheckpointLine(state('running', 0))).not.toMatch(/every 0/);
    expect(modelsSelectors.noCheckpointLine(state('running', 0))).toContain('checkpointEvery 0');
    expect(modelsSelectors.noCheckpointLine(state('running', 5))).toContain('5');
  });

  it('lists checkpoints newest first', () => {
    const steps = Array.from({ length: 25 }, (_, i) => step(i + 1));
    expect(modelsSelectors.checkpoints(steps).map((s) => s.step)).toEqual([20, 10]);
  });
});
