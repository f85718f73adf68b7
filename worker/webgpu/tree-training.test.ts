/**
 * Tree training on WebGPU (Dawn; Mesa's lavapipe where there is no GPU): the device path takes the batched
 * attention op with the full ancestor mask, and tfjs's own gather gradient, yet gives the loss and gradients of
 * the same samples as padded rows — also behind a trunk shared across micro-batches (the mask then covers the
 * trunk's keys in front of each micro-batch's own). Skips only where no adapter exists (testing/gpu.ts).
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { readsSyncOnActiveBackend, selectBackend } from '../backend.ts';
import type { TrainOptions, TrainSample } from '../common/engine.ts';
import { initWeights, toParams } from '../model.ts';
import { AdamW } from '../optimizer.ts';
import { readBatchGradients } from '../testing/batch-gradients.ts';
import { tinyByteConfig } from '../testing/configs.ts';
import { text, TRUNK_BUDGET, trunkSamples } from '../testing/tree-samples.ts';
import { planTreeRuns } from '../prefix-tree.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS } from '../train.ts';
import { webgpuSkipReason } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();
const cfg = tinyByteConfig({ max_position_embeddings: 128 });

/** A shared 30-token prompt, then branches: one inside the other's generated turn, one repeating it, one apart. */
function samples(): TrainSample[] {
  const prompt = text(30, 1);
  const make = (generated: number[], advantage: number, head = prompt): TrainSample => {
    const tokens = [...head, ...generated];
    const lossMask = tokens.map((_, i) => (i >= head.length ? 1 : 0));
    return { tokens, lossMask, advantages: lossMask.map((m) => m * advantage), oldLogprobs: lossMask.map((m, i) => (m ? -5.5 + (i % 5) * 0.1 : 0)) };
  };
  return [make(text(12, 2), 1), make([...text(12, 2).slice(0, 4), ...text(8, 3)], -0.6), make(text(12, 2), -0.3), make(text(10, 4), 0.5, text(20, 5))];
}


async function lossAndGradients(packing: 'tree' | 'rows', batch = samples(), microBatchTokens = DEFAULT_TRAIN_OPTIONS.microBatchTokens): Promise<{ loss: number; grads: Float32Array[]; microBatches: number }> {
  const params = toParams(initWeights(cfg, 4), true);
  const trainable = Object.values(params) as tf.Variable[];
  try {
    const opts: TrainOptions = { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, packing, microBatchTokens };
    const { loss, grads, microBatches } = await readBatchGradients(batchGradients({ cfg, params, lora: null, trainable, optimizer: new AdamW(trainable), reference: null }, batch, opts));
    return { loss, grads, microBatches };
  } finally {
    tf.dispose(trainable);
  }
}

function expectSame(tree: { loss: number; grads: Float32Array[] }, rows: { loss: number; grads: Float32Array[] }): void {
  expect(Math.abs(rows.loss)).toBeGreaterThan(1e-3);
  expect(Math.abs(tree.loss - rows.loss) / Math.abs(rows.loss)).toBeLessThan(1e-4);
  let diff = 0;
  let norm = 0;
  tree.grads.forEach((g, i) => g.forEach((x, j) => ((diff += (x - rows.grads[i][j]) ** 2), (norm += rows.grads[i][j] ** 2))));
  expect(Math.sqrt(diff / norm)).toBeLessThan(1e-4);
}

describe.skipIf(skipReason !== null)(`tree training on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  it('gives the loss and gradients of padded rows', async () => {
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here
    expect(readsSyncOnActiveBackend()).toBe(false); // the device path, not the host loop
    expectSame(await lossAndGradients('tree'), await lossAndGradients('rows'));
  });

  it('gives the loss and gradients of padded rows behind a trunk shared by two micro-batches', async () => {
    await selectBackend('webgpu', { syncReads: false });
    const batch = trunkSamples();
    const runs = planTreeRuns(batch, TRUNK_BUDGET);
    expect(runs.map((r) => [r.trunkLength, r.microBatches.length])).toEqual([[69, 2]]);
    const tree = await lossAndGradients('tree', batch, TRUNK_BUDGET);
    expect(tree.microBatches).toBe(2);
    expectSame(tree, await lossAndGradients('rows', batch));
  });
});
