/**
 * stop() closes the peer's services one at a time, the last started first: a training step under way when the peer
 * is told to stop completes before the engine it runs on is closed. A real peer (SQLite, HTTP, builtin:tiny in a
 * worker thread); the engine is the real one, wrapped only to record the order of its calls.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TrainerEngine } from '../../worker/common/engine.ts';
import { startWorkerEngine } from './models/start-engine.ts';
import { PeerRuntime } from './runtime.ts';
import { runEpisode } from './training/testing/peer-agent.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-stop-order-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('stopping a peer', () => {
  it('lets a training step under way finish before its engine closes', async () => {
    const order: string[] = [];
    let stopPeer: () => void = () => {};
    const recording = async (...args: Parameters<typeof startWorkerEngine>): Promise<TrainerEngine> => {
      const engine = await startWorkerEngine(...args);
      return new Proxy(engine, {
        get(target, property, receiver) {
          if (property === 'trainStep') {
            return async (...stepArgs: Parameters<TrainerEngine['trainStep']>) => {
              order.push('train-start');
              // Told to stop while the update runs: the engine's answer arrives as a message from its thread, long
              // after anything that stop() would do at once.
              stopPeer();
              const metrics = await target.trainStep(...stepArgs);
              order.push('train-end');
              return metrics;
            };
          }
          if (property === 'close') {
            return async () => {
              order.push('engine-closed');
              await target.close();
            };
          }
          const value = Reflect.get(target, property, receiver) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
    };
    const runtime = await PeerRuntime.start({
      dataDir,
      port: 0,
      consoleLogLevel: 'silent',
      models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
      startEngine: recording,
      training: { config: { batchTasks: 1, groupSize: 2, checkpointEvery: 0 } },
    });
    let stopped: Promise<void> | undefined;
    stopPeer = () => void (stopped ??= runtime.stop());
    await runEpisode(runtime, 'task-1', 0);
    await runEpisode(runtime, 'task-1', 1);
    // The second end completes the group: the step starts and, inside it, the stop.
    await expect.poll(() => order.includes('train-start'), { timeout: 60_000 }).toBe(true);
    await stopped;
    expect(order).toEqual(['train-start', 'train-end', 'engine-closed']);
    await runtime.stop(); // twice is safe
  });
});
