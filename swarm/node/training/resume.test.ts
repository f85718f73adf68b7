/**
 * Resume is continuation: a run killed with SIGKILL after a checkpointed step and started again on the same data
 * folder ends with the weights of the run that was never stopped (same seeds, same episodes), within float
 * tolerance. The peers are whole PeerRuntimes in child processes (runtime-process.ts), so the kill is a real one:
 * no stop, no final write. The second half: the same kill with the checkpoint's optimizer state removed (what a
 * weights-only checkpoint gave) ends elsewhere, so the comparison can fail and the optimizer state is what makes it
 * pass. The run trains with a KL term, so the reference has to be the weights training started from as well.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { NamedTensors } from '../../../worker/common/engine.ts';
import type { PeerOptions } from '../runtime.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../p2p/testing/runtime-processes.ts';
import { checkpointsDir, OPTIMIZER_FILE, readCheckpointMeta, readCheckpointWeights } from './checkpoints.ts';
import { listenSteps, runSeededEpisode } from './testing/process-agent.ts';

const STEPS = 4;
const KILL_AFTER = 2;
// Same agreement as one engine with itself: the resumed run computes the same floats in the same order.
const SAME_WEIGHTS = 1e-5;
// Fresh AdamW moments after the restart change every weight by about a learning rate: far more than the tolerance.
const DIFFERENT_WEIGHTS = 1e-4;

const folders: string[] = [];
const peers: RuntimeProcess[] = [];
afterEach(async () => {
  for (const peer of peers.splice(0)) await peer.kill();
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function options(dataDir: string): PeerOptions {
  return {
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
    training: { config: { batchTasks: 2, groupSize: 2, checkpointEvery: 1, maxSteps: STEPS, train: { learningRate: 1e-3, klCoef: 0.1 } } },
  };
}

async function startPeer(dataDir: string): Promise<RuntimeProcess> {
  const peer = await startRuntimeProcess(options(dataDir));
  peers.push(peer);
  return peer;
}

/** Step `step`'s batch: two tasks, rewards that differ within each, a seed per episode; resolves once committed. */
async function trainStep(peer: RuntimeProcess, step: number): Promise<void> {
  const events = listenSteps(peer);
  await events.opened;
  const episodes = [['task-a', 1], ['task-a', 0], ['task-b', 0], ['task-b', 1]] as const;
  for (const [i, [task, reward]] of episodes.entries()) await runSeededEpisode(peer, task, reward, 1000 * step + i);
  await events.step(step);
  events.close();
}

async function finalWeights(dataDir: string): Promise<NamedTensors> {
  return readCheckpointWeights(join(checkpointsDir(dataDir, 'tiny'), `step-${STEPS}`));
}

function maxDifference(a: NamedTensors, b: NamedTensors): number {
  let max = 0;
  for (const name of Object.keys(a)) a[name].data.forEach((x, i) => (max = Math.max(max, Math.abs(x - b[name].data[i]))));
  return max;
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  folders.push(dir);
  return dir;
}

/** Steps 1..KILL_AFTER, SIGKILL, `between` (with the data folder), restart, the remaining steps. */
async function killedRun(between: (dataDir: string) => void = () => {}): Promise<NamedTensors> {
  const dataDir = tempDir('agentjet-resume-killed-');
  const first = await startPeer(dataDir);
  for (let step = 1; step <= KILL_AFTER; step++) await trainStep(first, step);
  await first.kill();
  between(dataDir);
  const second = await startPeer(dataDir);
  const state = await second.get<{ step: number; policyVersion: number; status: string }>('/api/models/tiny/training');
  expect(state).toMatchObject({ step: KILL_AFTER, policyVersion: KILL_AFTER, status: 'running' });
  for (let step = KILL_AFTER + 1; step <= STEPS; step++) await trainStep(second, step);
  await second.stop();
  return finalWeights(dataDir);
}

describe('resuming after SIGKILL', () => {
  it('ends with the weights of the run that was never stopped', async () => {
    const straightDir = tempDir('agentjet-resume-straight-');
    const straight = await startPeer(straightDir);
    for (let step = 1; step <= STEPS; step++) await trainStep(straight, step);
    await straight.stop();
    const expected = await finalWeights(straightDir);
    const meta = readCheckpointMeta(join(checkpointsDir(straightDir, 'tiny'), `step-${STEPS}`));
    expect(meta).toMatchObject({ step: STEPS, policyVersion: STEPS, reference: 'initial-weights' });
    expect(meta.files).toContain(OPTIMIZER_FILE);

    expect(maxDifference(await killedRun(), expected)).toBeLessThan(SAME_WEIGHTS);

    // Without the optimizer state the resumed run is another run.
    const weightsOnly = await killedRun((dataDir) => rmSync(join(checkpointsDir(dataDir, 'tiny'), `step-${KILL_AFTER}`, OPTIMIZER_FILE)));
    expect(maxDifference(weightsOnly, expected)).toBeGreaterThan(DIFFERENT_WEIGHTS);
  });
});
