/** Runs, steps and evals as the control API answers them, for the runs slice's and panels' tests. */
import type { RunStep } from '../../../../../swarm/common/api.ts';
import type { RunDetail, RunEvalPoint, RunSummary } from '../../../../../swarm/common/runs-api.ts';

export function runSummary(n: number, over: Partial<RunSummary> = {}): RunSummary {
  return {
    id: `run-${n}`,
    name: `tiny-${n}`,
    model: 'tiny',
    status: 'finished',
    start: { kind: 'source', source: 'builtin:tiny' },
    seed: n,
    configHash: `h${n}`,
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(),
    endedAt: new Date(Date.UTC(2026, 0, 1, 0, n, 30)).toISOString(),
    steps: 10,
    lastStep: 10,
    bestReward: 0.9,
    lastReward: 0.8,
    lastEval: null,
    warnings: [],
    episodeWindow: { from: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(), before: null },
    ...over,
  };
}

export function trainingConfig(over: { klCoef?: number; learningRate?: number; evalEvery?: number } = {}): Record<string, unknown> {
  return {
    batchTasks: 4,
    groupSize: 4,
    evalEvery: over.evalEvery ?? 10,
    seed: 1,
    train: { loss: 'ppo', klCoef: over.klCoef ?? 0.01, learningRate: over.learningRate ?? 1e-5, clipLow: 0.2, clipHigh: 0.28 },
    lora: null,
  };
}

export function runDetail(n: number, over: Partial<RunDetail> = {}): RunDetail {
  return {
    ...runSummary(n),
    config: trainingConfig(),
    changedFromDefaults: [],
    events: [],
    scripts: [],
    checkpoints: [],
    stepOffset: 0,
    ...over,
  };
}

export function runStep(runStep: number, over: Partial<RunStep> = {}): RunStep {
  return {
    model: 'tiny',
    step: runStep + 100,
    runId: 'run-1',
    runStep,
    policyVersion: runStep + 1,
    time: new Date(Date.UTC(2026, 0, 1, 0, runStep)).toISOString(),
    groups: 2,
    episodes: 8,
    samples: 4,
    rewardMean: runStep / 10,
    metrics: { loss: 1, clipFraction: 0.1, kl: 0.01, entropy: 2, gradNorm: 1, tokens: 2000, trainedTokens: 500, microBatches: 1, timeMs: 500 },
    checkpoint: null,
    ...over,
  };
}

export function evalPoint(step: number, successRate: number | null, meanReward: number | null = 0.5): RunEvalPoint {
  return { step, policyVersion: step + 1, episodes: 8, successRate, meanReward, time: new Date(Date.UTC(2026, 0, 2, 0, step)).toISOString() };
}
