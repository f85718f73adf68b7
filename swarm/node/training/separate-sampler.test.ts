/**
 * A sampler engine of its own (training's `sampler` setting; the default with `staleness` ≥ 1) on a real peer:
 * the calls are served by it, never by the trainer, so a call is answered while the trainer is inside a step; after
 * the step the sampler holds the trainer's weights (the adapters only, with LoRA) under the new version. One engine
 * is started where the setting says so, the setting cannot change live, and a sampler that fails to start fails
 * the model without leaving the trainer's engine running.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelSource, NamedTensors, TrainerEngine } from '../../../worker/common/engine.ts';
import type { TrainStepSummary } from '../../common/api.ts';
import type { EngineStarter } from '../models/model-host.ts';
import { startWorkerEngine } from '../models/start-engine.ts';
import { PeerRuntime } from '../runtime.ts';
import { getCalls } from '../store/episode-reads.ts';
import type { TrainingConfigOverrides } from './config.ts';
import { chat, get, runEpisode, startEpisode } from './testing/peer-agent.ts';

const folders: string[] = [];
afterEach(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const OPENING = [
  { role: 'system', content: 'You solve tasks.' },
  { role: 'user', content: 'Task task-b: count to three.' },
];

/**
 * Worker-thread engines, as a peer starts them (in-process ones would share one thread's tfjs backend), that count
 * their generate calls and closes; `holdNextStep` keeps the next trainStep until released. `started` is in call
 * order: the first is the trainer (the sampler starts once the trainer chose its backend).
 */
class Engines {
  readonly started: TrainerEngine[] = [];
  readonly generates = new Map<TrainerEngine, number>();
  readonly closed = new Set<TrainerEngine>();
  private release: (() => void) | null = null;
  private entered: (() => void) | null = null;
  private calls = 0;

  constructor(private readonly failAt: number | null = null) {}

  readonly start: EngineStarter = async (source: ModelSource, options) => {
    const index = this.calls++;
    if (index === this.failAt) throw new Error('no memory for a second engine');
    const engine = await startWorkerEngine(source, options);
    this.started[index] = engine;
    this.generates.set(engine, 0);
    const generate = engine.generate.bind(engine);
    engine.generate = (...args) => {
      this.generates.set(engine, (this.generates.get(engine) ?? 0) + 1);
      return generate(...args);
    };
    const trainStep = engine.trainStep.bind(engine);
    engine.trainStep = async (...args) => {
      if (this.release === null && this.entered) {
        const held = new Promise<void>((resolve) => (this.release = resolve));
        this.entered();
        await held;
      }
      return trainStep(...args);
    };
    const close = engine.close.bind(engine);
    engine.close = () => {
      this.closed.add(engine);
      return close();
    };
    return engine;
  };

  /** Resolves once the next trainStep is entered and held; call the returned function to let it run. */
  holdNextStep(): Promise<() => void> {
    return new Promise((resolve) => {
      this.entered = () => resolve(() => this.release?.());
    });
  }
}

async function startPeer(config: TrainingConfigOverrides, engines: Engines): Promise<PeerRuntime> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-sampler-'));
  folders.push(dataDir);
  return PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 16 }],
    startEngine: engines.start,
    training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0, train: { learningRate: 1e-3, loss: 'decoupled-ppo' }, ...config } },
  });
}

function names(weights: NamedTensors): string[] {
  return Object.keys(weights).sort();
}

describe('a separate sampler engine', () => {
  it('answers calls while the trainer is inside a step, then serves the trainer’s weights under the new version', async () => {
    const engines = new Engines();
    const runtime = await startPeer({ staleness: 1 }, engines);
    try {
      const model = runtime.serving.models.find('tiny')!;
      const [trainer, sampler] = engines.started;
      expect(engines.started).toHaveLength(2);
      expect(model.engine).toBe(trainer);
      expect(model.sampler).toBe(sampler);
      expect(model.status().sampler).toBe('separate');
      expect(sampler.info.backend.name).toBe(trainer.info.backend.name);
      const before = await sampler.getWeights();

      const held = engines.holdNextStep();
      await runEpisode(runtime, 'task-a', 1);
      await runEpisode(runtime, 'task-a', 0);
      const release = await held;
      // The trainer is inside its step: a new episode's call is answered meanwhile, on the weights before it.
      const during = await startEpisode(runtime, 'task-b');
      const answer = await chat(during, OPENING);
      expect(getCalls(runtime.db, during.episodeId).map((c) => c.policyVersion)).toEqual([0]);
      release();
      await runtime.training.loop('tiny').whenSettled();

      expect(model.policyVersion).toBe(1);
      const trained = await trainer.getWeights();
      expect(await sampler.getWeights()).toEqual(trained);
      expect(await sampler.getWeights()).not.toEqual(before);
      // The episode begun during the step continues on the new weights, from the sampler.
      await chat(during, [...OPENING, { role: 'assistant', content: answer }, { role: 'user', content: 'Output: ok' }]);
      expect(getCalls(runtime.db, during.episodeId).map((c) => c.policyVersion)).toEqual([0, 1]);
      expect(engines.generates.get(trainer)).toBe(0);
      expect(engines.generates.get(sampler)).toBe(6);
      // The step reports how busy the sampler was: it answered calls during the step's phases.
      const { steps } = (await get(runtime, '/api/models/tiny/steps')).body as unknown as { steps: TrainStepSummary[] };
      expect(steps[0].samplerBusyShare).toBeGreaterThan(0);
      expect(steps[0].samplerBusyShare).toBeLessThanOrEqual(1);
    } finally {
      await runtime.stop();
    }
    expect(engines.closed.size).toBe(2);
  });

  it('takes only the LoRA adapters from the trainer', async () => {
    const engines = new Engines();
    const runtime = await startPeer({ staleness: 1, lora: { rank: 2, alpha: 4, targetModules: ['q_proj', 'v_proj'] }, train: { learningRate: 1e-2, loss: 'decoupled-ppo' } }, engines);
    try {
      const [trainer, sampler] = engines.started;
      const loads: string[][] = [];
      const setWeights = sampler.setWeights.bind(sampler);
      sampler.setWeights = (weights, version) => {
        loads.push(names(weights));
        return setWeights(weights, version);
      };
      const before = await sampler.getWeights();
      await runEpisode(runtime, 'task-a', 1);
      await runEpisode(runtime, 'task-a', 0);
      await runtime.training.loop('tiny').whenSettled();

      expect(loads).toHaveLength(1);
      expect(loads[0].length).toBeGreaterThan(0);
      expect(loads[0].every((name) => name.includes('lora_'))).toBe(true);
      expect(await sampler.getWeights()).toEqual(await trainer.getWeights());
      expect(await sampler.getWeights()).not.toEqual(before);
    } finally {
      await runtime.stop();
    }
  });

  it('trains synchronously on a separate sampler too: the drained step hands it the new weights', async () => {
    const engines = new Engines();
    const runtime = await startPeer({ sampler: 'separate' }, engines);
    try {
      const [trainer, sampler] = engines.started;
      expect(engines.started).toHaveLength(2);
      await runEpisode(runtime, 'task-a', 1);
      await runEpisode(runtime, 'task-a', 0);
      await runtime.training.loop('tiny').whenSettled();
      expect(runtime.serving.models.find('tiny')!.policyVersion).toBe(1);
      expect(await sampler.getWeights()).toEqual(await trainer.getWeights());
      expect(sampler.info.policyVersion).toBe(1);
    } finally {
      await runtime.stop();
    }
  });

  it('is not started where the setting says shared, nor by default when training is synchronous', async () => {
    for (const config of [{ staleness: 1, sampler: 'shared' as const }, {}]) {
      const engines = new Engines();
      const runtime = await startPeer(config, engines);
      try {
        const model = runtime.serving.models.find('tiny')!;
        expect(engines.started).toHaveLength(1);
        expect(model.sampler).toBe(model.engine);
        expect(model.status().sampler).toBe('shared');
        expect(() => runtime.training.loop('tiny').updateConfig({ sampler: 'separate' })).toThrow(expect.objectContaining({ name: 'TrainingConfigError', field: 'sampler' }));
      } finally {
        await runtime.stop();
      }
    }
  });

  it('fails the model when the sampler cannot start, and closes the trainer’s engine', async () => {
    const engines = new Engines(1);
    const runtime = await startPeer({ staleness: 1 }, engines);
    try {
      const model = runtime.serving.models.find('tiny')!;
      expect(model.state).toBe('failed');
      expect(engines.closed.has(engines.started[0])).toBe(true);
    } finally {
      await runtime.stop();
    }
  });
});
