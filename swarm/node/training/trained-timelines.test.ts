/**
 * One merge: an episode is merged once, when it ends, in the mode its model trains with, and training reads those
 * stored timelines. A real peer (PeerRuntime, SQLite, gateway over HTTP) hosts builtin:tiny on an in-process engine
 * whose own trainStep also keeps the samples it is handed; it trains one step in each mode, and the samples must be,
 * token for token, the stored timelines and the episodes' export (what the merge view shows).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { TrainStepSummary } from '../../common/api.ts';
import type { MergeMode } from '../../common/timeline/merge.ts';
import type { TrainSample } from '../../../worker/common/engine.ts';
import { createEngine } from '../../../worker/node/load-model.ts';
import { PeerRuntime } from '../runtime.ts';
import { getEpisodeExport, getTimelines } from '../store/episode-reads.ts';
import { get, MODEL, runEpisode } from './testing/peer-agent.ts';

const TRAINING = { batchTasks: 2, groupSize: 2, checkpointEvery: 0, train: { learningRate: 1e-3 } };
/** Two tasks, two episodes each, rewards that differ within each group (so both groups are trained on). */
const EPISODES = [
  { task: 'task-a', reward: 1, success: true },
  { task: 'task-a', reward: 0, success: false },
  { task: 'task-b', reward: 0.3, success: false },
  { task: 'task-b', reward: 0.9, success: true },
] as const;
const CALLS_PER_EPISODE = 2; // runEpisode: act, observe, act again

const folders: string[] = [];
afterEach(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface Arrays {
  tokens: number[];
  lossMask: number[];
  logprobs: number[];
}
const arrays = (t: {
  tokens: readonly number[];
  lossMask: readonly number[];
  logprobs: readonly number[];
}): Arrays => ({
  tokens: [...t.tokens],
  lossMask: [...t.lossMask],
  logprobs: [...t.logprobs],
});

/** A peer training `tiny` in `mode`, and every batch of samples its engine's trainStep was given. */
async function startPeer(mode: MergeMode): Promise<{ runtime: PeerRuntime; trainSteps: TrainSample[][] }> {
  const dataDir = mkdtempSync(join(tmpdir(), `agentjet-one-merge-${mode}-`));
  folders.push(dataDir);
  const trainSteps: TrainSample[][] = [];
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: MODEL, source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 8 }],
    startEngine: async (source) => {
      const engine = await createEngine({ source });
      const trainStep = engine.trainStep.bind(engine);
      // The real update; the samples are only kept on the way in.
      engine.trainStep = (samples, options) => {
        trainSteps.push(samples);
        return trainStep(samples, options);
      };
      return engine;
    },
    training: { config: { ...TRAINING, mergeMode: mode } },
  });
  return { runtime, trainSteps };
}

describe.each(['naive', 'merged'] as const)('training in %s mode', (mode) => {
  it('trains on exactly the timelines stored at end and exported for the merge view', async () => {
    const { runtime, trainSteps } = await startPeer(mode);
    try {
      const ids: string[] = [];
      for (const e of EPISODES) ids.push(await runEpisode(runtime, e.task, e.reward, { success: e.success }));
      await runtime.training.loop(MODEL).whenSettled();
      expect(trainSteps).toHaveLength(1);
      const trained = trainSteps[0].map((s) =>
        arrays({ tokens: s.tokens, lossMask: s.lossMask, logprobs: s.oldLogprobs }),
      );

      // The batch is the groups in the order they filled, each episode in finish order: here, the order they ran.
      const stored = ids.map((id) => getTimelines(runtime.db, id)!);
      for (const merge of stored) expect(merge.mode).toBe(mode);
      expect(trained).toEqual(stored.flatMap((m) => m.timelines.map(arrays)));

      const tokenizer = runtime.serving.models.find(MODEL)!.tokenizer;
      const exports = ids.map((id) => getEpisodeExport(runtime.db, id, tokenizer, mode));
      for (const doc of exports) expect(doc.mode).toBe(mode);
      expect(trained).toEqual(exports.flatMap((doc) => doc.timelines.map(arrays)));

      // Not a vacuous match: the two modes pack the same calls differently, and the other mode's document (merged
      // from the calls now, the way the export used to fall back) is not what was trained.
      const calls = ids.length * CALLS_PER_EPISODE;
      if (mode === 'naive') {
        expect(trained).toHaveLength(calls);
        for (const doc of exports) for (const d of doc.decisions) expect(d.reason).toBe('naive-mode');
      } else {
        expect(trained).toHaveLength(ids.length);
      }
      const other = ids.map((id) =>
        getEpisodeExport(runtime.db, id, tokenizer, mode === 'naive' ? 'merged' : 'naive'),
      );
      expect(trained).not.toEqual(other.flatMap((doc) => doc.timelines.map(arrays)));

      const [step] = (await get(runtime, `/api/models/${MODEL}/steps`)).body.steps as TrainStepSummary[];
      expect(step).toMatchObject({ episodes: ids.length, samples: trained.length, successRate: 0.5 });
      expect(step.metrics.tokens).toBe(trained.reduce((sum, t) => sum + t.tokens.length, 0));
      const naiveTokens = exports
        .flatMap((doc) => doc.calls)
        .reduce((sum, c) => sum + c.promptIds.length + c.generatedIds.length, 0);
      expect(step.naiveTokens).toBe(naiveTokens);
    } finally {
      await runtime.stop();
    }
  });
});
