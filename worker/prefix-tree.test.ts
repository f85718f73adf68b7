/**
 * Tree packing is exact: the token-sum loss and every parameter's gradient over a prefix tree equal those of the
 * same samples as padded rows, on groups whose samples share prefixes of different depths, branch inside a turn,
 * repeat each other with other advantages, and on a batch of one timeline (where the tree is that timeline).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import type { DecoderConfig, TrainOptions, TrainSample } from './common/engine.ts';
import { initWeights, seededRandom, toParams } from './model.ts';
import { AdamW } from './optimizer.ts';
import { buildPrefixTree, packTreeMicroBatches, treeTokenCount } from './prefix-tree.ts';
import { readBatchGradients, type ReadBatchGradients } from './testing/batch-gradients.ts';
import { tinyByteConfig } from './testing/configs.ts';
import { gen, prompt, type SamplePart, text, treeSample } from './testing/tree-samples.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS, type TrainState } from './train.ts';

const TOLERANCE = 1e-4;
const cfg: DecoderConfig = tinyByteConfig({ max_position_embeddings: 256 });
const rand = seededRandom(5);

beforeAll(async () => {
  await selectBackend('wasm');
});

const sample = (parts: SamplePart[], advantage: number): TrainSample => treeSample(parts, advantage, rand);


const system = text(40, 1);
/** A GRPO-like group: one shared system prompt + task, then branches. */
const group: TrainSample[] = [
  sample([prompt(system), gen(text(12, 2)), prompt(text(8, 3)), gen(text(10, 4))], 1.2),
  // Diverges inside the first generated turn (its first 5 generated tokens equal the sample above).
  sample([prompt(system), gen([...text(12, 2).slice(0, 5), ...text(9, 5)])], -0.7),
  // Shares the first generated turn and the observation, then generates something else.
  sample([prompt(system), gen(text(12, 2)), prompt(text(8, 3)), gen(text(6, 6))], 0.4),
  // The same tokens as the first sample, with another advantage and other old logprobs: separate loss entries.
  sample([prompt(system), gen(text(12, 2)), prompt(text(8, 3)), gen(text(10, 4))], -0.9),
  // A shallow share: only the first 10 system tokens.
  sample([prompt(system.slice(0, 10)), prompt(text(20, 7)), gen(text(15, 8))], 0.3),
  // Nothing shared.
  sample([prompt(text(25, 9)), gen(text(11, 10))], -0.2),
];

function state(): TrainState {
  const params = toParams(initWeights(cfg, 4), true);
  const trainable = Object.values(params) as tf.Variable[];
  return { cfg, params, lora: null, trainable, optimizer: new AdamW(trainable), reference: null };
}

function gradientsOf(s: TrainState, samples: TrainSample[], over: Partial<TrainOptions>): Promise<ReadBatchGradients> {
  return readBatchGradients(batchGradients(s, samples, { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, ...over }));
}

function relativeError(a: Float32Array[], b: Float32Array[]): number {
  let diff = 0;
  let norm = 0;
  a.forEach((ga, i) => ga.forEach((x, j) => ((diff += (x - b[i][j]) ** 2), (norm += b[i][j] ** 2))));
  return Math.sqrt(diff / norm);
}

function expectSame(tree: ReadBatchGradients, rows: ReadBatchGradients): void {
  expect(Math.abs(rows.loss)).toBeGreaterThan(1e-3); // a real loss, a real gradient: not a vacuous match
  expect(Math.abs(tree.loss - rows.loss) / Math.abs(rows.loss)).toBeLessThanOrEqual(TOLERANCE);
  expect(Math.abs(tree.entropy - rows.entropy) / Math.abs(rows.entropy)).toBeLessThanOrEqual(TOLERANCE);
  expect(relativeError(tree.grads, rows.grads)).toBeLessThanOrEqual(TOLERANCE);
}

describe('tree packing (prefix tree over a micro-batch)', () => {
  it('computes each shared prefix once', () => {
    const tree = buildPrefixTree(group);
    const sum = group.reduce((a, s) => a + s.tokens.length, 0);
    expect(tree.sampleTokens).toBe(sum);
    expect(tree.ids.length).toBe(treeTokenCount(group));
    expect(tree.ids.length).toBeLessThan(sum - 3 * system.length);
    // One loss entry per generated token of every sample, the repeated sample's included.
    expect(tree.entryTarget.length).toBe(group.reduce((a, s) => a + s.lossMask.reduce((x, m) => x + m, 0), 0));
  });

  it('gives the loss and gradients of padded rows (PPO, token-sum)', async () => {
    const s = state();
    const rows = await gradientsOf(s, group, { packing: 'rows' });
    const tree = await gradientsOf(s, group, { packing: 'tree' });
    expectSame(tree, rows);
    expect(tree.computedTokens).toBeLessThan(rows.computedTokens);
  });

  it('stays exact with token-mean normalisation, a KL term and an entropy bonus', async () => {
    const s = state();
    s.reference = toParams(initWeights(cfg, 8)); // another model's weights: the KL term is far from zero
    const over = { normalization: 'token-mean', klCoef: 0.1, entropyCoef: 0.01 } as const;
    expectSame(await gradientsOf(s, group, { ...over, packing: 'tree' }), await gradientsOf(s, group, { ...over, packing: 'rows' }));
  });

  it('splits at subtree boundaries under a small token budget and stays exact', async () => {
    const s = state();
    const budget = 120;
    const batches = packTreeMicroBatches(group, budget);
    expect(batches.length).toBeGreaterThan(1);
    for (const b of batches) expect(b.length === 1 || treeTokenCount(b) <= budget).toBe(true);
    const tree = await gradientsOf(s, group, { packing: 'tree', microBatchTokens: budget });
    expect(tree.microBatches).toBe(batches.length);
    expectSame(tree, await gradientsOf(s, group, { packing: 'rows' }));
  });

  it('of a single timeline is that timeline (the tree degenerates to the rows path)', async () => {
    const s = state();
    const one = [group[0]];
    const tree = await gradientsOf(s, one, { packing: 'tree' });
    expect(tree.computedTokens).toBe(one[0].tokens.length);
    expectSame(tree, await gradientsOf(s, one, { packing: 'rows' }));
  });

  it('keeps a branch\'s own advantage (the check can fail)', async () => {
    const s = state();
    const rows = await gradientsOf(s, group, { packing: 'rows' });
    // The repeated sample with the first one's advantage: the tokens are the same, the loss is not.
    const swapped = group.map((x, i) => (i === 3 ? { ...x, advantages: group[0].advantages } : x));
    expect(relativeError((await gradientsOf(s, swapped, { packing: 'tree' })).grads, rows.grads)).toBeGreaterThan(TOLERANCE);
  });
});
