import { describe, expect, it } from 'vitest';
import type { ModelStatus, StatusPayload, TrainStepSummary } from '../swarm/common/api.ts';
import { RunNotices } from './run-notices.ts';

function status(models: Array<Pick<ModelStatus, 'name' | 'engineState'> & { error?: string }>): StatusPayload {
  return {
    app: 'agentjet',
    version: '0.1.0',
    nodeId: 'n',
    startedAt: '2026-01-01T00:00:00Z',
    uptimeS: 1,
    roles: ['server'],
    dataDir: '/d',
    backend: null,
    urls: { api: 'a', gateway: 'g', ui: 'u' },
    models: models.map((m) => ({ source: 'builtin:tiny', policyVersion: 1, step: 0, backend: null, pool: { active: 0, limit: 8 }, ...m })),
    store: { path: '/d/s', schemaVersion: 5, episodes: 0 },
    p2p: { enabled: false, peerId: null, peers: 0, swarm: null },
  };
}

function step(model: string, n: number, rewardMean: number): TrainStepSummary {
  return {
    model,
    step: n,
    policyVersion: n,
    time: '2026-01-01T00:00:00Z',
    groups: 1,
    episodes: 2,
    samples: 2,
    rewardMean,
    metrics: { loss: 0, kl: 0, clipFraction: 0, entropy: 0, gradNorm: 0, tokens: 10, trainedTokens: 10, microBatches: 1, timeMs: 5 },
    checkpoint: null,
  };
}

describe('run notices', () => {
  it('announces a training run that finished, once, with its last step and reward', () => {
    const notices = new RunNotices();
    expect(notices.event({ type: 'train-step', data: step('tiny', 20, 0.75) }).checkTraining).toEqual(['tiny']);
    expect(notices.training({ model: 'tiny', status: 'running', step: 19 })).toEqual([]);
    expect(notices.training({ model: 'tiny', status: 'finished', step: 20 })).toEqual([
      { title: 'Training of tiny finished', body: 'Step 20 · reward mean 0.750', view: 'models' },
    ]);
    expect(notices.training({ model: 'tiny', status: 'finished', step: 20 })).toEqual([]);
  });

  it('announces a failed run with its error, and a failed engine from the status', () => {
    const notices = new RunNotices();
    expect(notices.training({ model: 'tiny', status: 'failed', step: 3, lastError: 'NaN loss' })[0]).toMatchObject({
      title: 'Training of tiny failed',
      body: 'NaN loss',
    });
    expect(notices.event({ type: 'status', data: status([{ name: 'tiny', engineState: 'rolling' }]) })).toEqual({ notices: [], checkTraining: [] });
    const failed = notices.event({ type: 'status', data: status([{ name: 'tiny', engineState: 'failed', error: 'out of memory' }]) });
    expect(failed.notices).toEqual([{ title: 'Model tiny failed', body: 'out of memory', view: 'models' }]);
    expect(failed.checkTraining).toEqual(['tiny']);
    // The next status tick repeats the state: nothing new.
    expect(notices.event({ type: 'status', data: status([{ name: 'tiny', engineState: 'failed' }]) }).notices).toEqual([]);
  });

  it('announces an opened circuit breaker once, and again after the client ran again', () => {
    const notices = new RunNotices();
    const broken = { type: 'client-paused', data: { name: 'calc', reason: '5 failures in a row: exit code 1', breaker: true } } as const;
    expect(notices.event(broken).notices).toEqual([
      { title: 'Client calc stopped: circuit breaker open', body: '5 failures in a row: exit code 1', view: 'clients' },
    ]);
    expect(notices.event(broken).notices).toEqual([]);
    expect(notices.event({ type: 'client-paused', data: { name: 'other', reason: 'paused by user', breaker: false } }).notices).toEqual([]);
    notices.event({ type: 'client', data: { name: 'calc', state: 'running' } as never });
    expect(notices.event(broken).notices).toHaveLength(1);
  });
});
