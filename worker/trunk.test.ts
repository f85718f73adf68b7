/**
 * Trunks: a prefix shared by the samples of several micro-batches is computed once per step (prefix-tree.ts
 * planTreeRuns, train.ts batchGradients, trunk.ts), and the loss, entropy, KL and every gradient stay those of the
 * samples trained one at a time and as padded rows — with prompt-only trunks and trunks holding generated tokens of
 * their own (each sample's advantage), two trunks in a batch, every loss, and a batch with no trunk at all.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from './backend.ts';
import type { DecoderConfig, TrainOptions, TrainSample } from './common/engine.ts';
import { createLora, loraVariables } from './lora.ts';
import { initWeights, seededRandom, toParams } from './model.ts';
import { AdamW } from './optimizer.ts';
import { commonPrefix, MIN_TRUNK_TOKENS, packTreeMicroBatches, planTreeRuns, treeTokenCount } from './prefix-tree.ts';
import { readBatchGradients, type ReadBatchGradients } from './testing/batch-gradients.ts';
import { tinyByteConfig } from './testing/configs.ts';
import { gen, prompt, type SamplePart, text, treeSample } from './testing/tree-samples.ts';
import { batchGradients, DEFAULT_TRAIN_OPTIONS, type TrainState } from './train.ts';

const TOLERANCE = 1e-4;
const cfg: DecoderConfig = tinyByteConfig({ max_position_embeddings: 256 });
const rand = seededRandom(17);

beforeAll(async () => {
  await selectBackend('wasm');
});

const sample = (parts: SamplePart[], advantage: number): TrainSample => treeSample(parts, advantage, rand);

/** Micro-batch budget: one whole sample per micro-batch (each is ~130 tokens), two or three suffixes behind a trunk. */
const BUDGET = 150;

/** A GRPO-like group: a shared opening, then timelines of their own (two share their first turn, one repeats another). */
function groupOf(opening: SamplePart[], seed: number, advantages: number[]): TrainSample[] {
  return advantages.map((a, i) => {
    const own = i === 1 ? [gen(text(14, seed + 1)), prompt(text(10, seed + 2)), gen(text(20, seed + 3 + i))] : i === 3 ? [gen(text(14, seed + 1)), prompt(text(10, seed + 2)), gen(text(20, seed + 3 + 1))] : [gen(text(14, seed + 10 + i)), prompt(text(10, seed + 2)), gen(text(22, seed + 20 + i))];
    return sample([...opening, ...own], a);
  });
}

/** An opening of prompt tokens only (the trunk holds no loss entry). */
const promptGroup = groupOf([prompt(text(90, 1))], 30, [1.1, -0.6, 0.4, -0.9, 0.2]);
/**
 * An opening with generated tokens inside it: a first turn every sample generated identically, after the same
 * prompt, so the trunk holds loss entries — one per sample, each with that sample's advantage and old logprob.
 */
const generatedGroup = groupOf([prompt(text(50, 2)), gen(text(30, 3)), prompt(text(12, 4))], 60, [0.9, -1.2, 0.3, 0.7, -0.4, 1.5]);

function state(): TrainState {
  const params = toParams(initWeights(cfg, 4), true);
  const trainable = Object.values(params) as tf.Variable[];
  return { cfg, params, lora: null, trainable, optimizer: new AdamW(trainable), reference: null };
}

function gradientsOf(s: TrainState, samples: TrainSample[], over: Partial<TrainOptions>): Promise<ReadBatchGradients> {
  return readBatchGradients(batchGradients(s, samples, { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, ...over }));
}

/** Each sample in a call of its own, summed (token-sum with a fixed divisor: the sum is the batch's). */
async function oneAtATime(s: TrainState, samples: TrainSample[], over: Partial<TrainOptions>): Promise<ReadBatchGradients> {
  const parts: ReadBatchGradients[] = [];
  for (const x of samples) parts.push(await gradientsOf(s, [x], { ...over, packing: 'rows' }));
  return {
    loss: parts.reduce((a, p) => a + p.loss, 0),
    entropy: parts.reduce((a, p) => a + p.entropy, 0),
    kl: parts.reduce((a, p) => a + p.kl, 0),
    clipped: parts.reduce((a, p) => a + p.clipped, 0),
    grads: parts[0].grads.map((g, i) => g.map((_, j) => parts.reduce((a, p) => a + p.grads[i][j], 0))),
    computedTokens: parts.reduce((a, p) => a + p.computedTokens, 0),
    microBatches: parts.length,
  };
}

function relativeError(a: Float32Array[], b: Float32Array[]): number {
  let diff = 0;
  let norm = 0;
  a.forEach((ga, i) => ga.forEach((x, j) => ((diff += (x - b[i][j]) ** 2), (norm += b[i][j] ** 2))));
  return Math.sqrt(diff / norm);
}

const relative = (x: number, want: number) => Math.abs(x - want) / Math.abs(want);

function expectSame(got: ReadBatchGradients, want: ReadBatchGradients, kl = false): void {
  expect(Math.abs(want.loss)).toBeGreaterThan(1e-3); // a real loss, a real gradient: not a vacuous match
  expect(relative(got.loss, want.loss)).toBeLessThanOrEqual(TOLERANCE);
  expect(relative(got.entropy, want.entropy)).toBeLessThanOrEqual(TOLERANCE);
  if (kl) {
    expect(want.kl).toBeGreaterThan(1e-3);
    expect(relative(got.kl, want.kl)).toBeLessThanOrEqual(TOLERANCE);
  }
  expect(got.clipped).toBe(want.clipped);
  expect(relativeError(got.grads, want.grads)).toBeLessThanOrEqual(TOLERANCE);
}

/** Tree nodes of token lists in lexicographic order (what a micro-batch's trie holds). */
const trieNodes = (lists: number[][]) => lists.reduce((a, l, i) => a + l.length - (i > 0 ? commonPrefix(lists[i - 1], l) : 0), 0);

/** What tree packing computed before trunks: each micro-batch's trie, the shared opening in each. */
const withoutTrunks = (samples: TrainSample[]) => packTreeMicroBatches(samples, BUDGET).reduce((a, b) => a + trieNodes(b.map((s) => s.tokens)), 0);

describe('trunk planning', () => {
  it('finds the group\'s opening as one trunk and packs the suffixes behind it by the budget', () => {
    // One timeline per micro-batch (the two identical ones share theirs).
    expect(packTreeMicroBatches(promptGroup, BUDGET)).toHaveLength(promptGroup.length - 1);
    const runs = planTreeRuns(promptGroup, BUDGET);
    expect(runs).toHaveLength(1);
    const [run] = runs;
    // The 90 shared prompt tokens less the last (each suffix tree's root), plus nothing: the turns differ at once.
    expect(run.trunkLength).toBe(89);
    expect(run.microBatches.length).toBeGreaterThanOrEqual(2);
    expect(run.microBatches.length).toBeLessThanOrEqual(4);
    for (const b of run.microBatches) expect(trieNodes(b.map((s) => s.tokens.slice(run.trunkLength)))).toBeLessThanOrEqual(BUDGET);
    expect(run.microBatches.flat()).toHaveLength(promptGroup.length);
  });

  it('gives each group its own trunk, and none where nothing long enough is shared', () => {
    const two = planTreeRuns([...promptGroup, ...generatedGroup], BUDGET);
    expect(two.map((r) => r.trunkLength).sort((a, b) => a - b)).toEqual([89, 50 + 30 + 12 - 1]);
    const apart = [0, 1, 2, 3].map((i) => sample([prompt(text(MIN_TRUNK_TOKENS, 100 + i)), gen(text(70, 200 + i))], 1));
    const runs = planTreeRuns(apart, BUDGET);
    expect(runs.every((r) => r.trunkLength === 0 && r.microBatches.length === 1)).toBe(true);
    expect(treeTokenCount(apart, BUDGET)).toBe(withoutTrunks(apart));
  });

  it('prefers the longer trunk of fewer micro-batches when it saves more', () => {
    const base = text(200, 7);
    const long = (seed: number) => ({ tokens: [...base, ...text(120, seed)] });
    // Two samples share 200 tokens; a third shares only the first 70 of them.
    const samples = [long(1), long(2), { tokens: [...base.slice(0, 70), 251, ...text(200, 3)] }];
    const runs = planTreeRuns(samples, 150);
    expect(runs.map((r) => r.trunkLength).sort((a, b) => a - b)).toEqual([0, 199]);
  });
});

describe('training behind a trunk is exact', () => {
  it('a prompt trunk over 2–4 micro-batches: loss, entropy and gradients of one sample at a time and of rows; the trunk computed once', async () => {
    const s = state();
    const tree = await gradientsOf(s, promptGroup, { packing: 'tree', microBatchTokens: BUDGET });
    expect(tree.microBatches).toBeGreaterThanOrEqual(2);
    expect(tree.microBatches).toBeLessThanOrEqual(4);
    expectSame(tree, await oneAtATime(s, promptGroup, {}));
    expectSame(tree, await gradientsOf(s, promptGroup, { packing: 'rows', microBatchTokens: BUDGET }));
    // Computed: the trunk once, then each micro-batch's suffix trie (its root, the last shared token, included).
    const [run] = planTreeRuns(promptGroup, BUDGET);
    const behind = run.microBatches.reduce((a, b) => a + trieNodes(b.map((x) => x.tokens.slice(run.trunkLength))), 0);
    expect(tree.computedTokens).toBe(run.trunkLength + behind);
    expect(tree.computedTokens).toBe(treeTokenCount(promptGroup, BUDGET));
    // That is the group's one trie plus each further micro-batch's root: the opening once, not once per micro-batch.
    expect(tree.computedTokens).toBe(treeTokenCount(promptGroup) + run.microBatches.length - 1);
    expect(tree.computedTokens).toBeLessThan(withoutTrunks(promptGroup) - run.trunkLength);
  });

  it('a trunk with generated tokens inside it keeps each sample\'s advantage (PPO, KL, entropy bonus, token-mean)', async () => {
    const s = state();
    s.reference = toParams(initWeights(cfg, 8)); // another model's weights: the KL term is far from zero
    expect(planTreeRuns(generatedGroup, BUDGET)[0].trunkLength).toBeGreaterThan(50 + 30); // the generated turn is in the trunk
    const over = { klCoef: 0.1, entropyCoef: 0.01 } as const;
    const tree = await gradientsOf(s, generatedGroup, { ...over, packing: 'tree', microBatchTokens: BUDGET });
    expectSame(tree, await oneAtATime(s, generatedGroup, over), true);
    const mean = { ...over, normalization: 'token-mean' } as const;
    expectSame(await gradientsOf(s, generatedGroup, { ...mean, packing: 'tree', microBatchTokens: BUDGET }), await gradientsOf(s, generatedGroup, { ...mean, packing: 'rows' }), true);
  });

  it('stays exact with decoupled PPO, truncated IS and SFT (proximal logprobs behind the trunk too)', async () => {
    const s = state();
    for (const loss of ['decoupled-ppo', 'truncated-is', 'sft'] as const) {
      const tree = await gradientsOf(s, generatedGroup, { loss, packing: 'tree', microBatchTokens: BUDGET });
      expect(tree.microBatches).toBeGreaterThan(1);
      expectSame(tree, await gradientsOf(s, generatedGroup, { loss, packing: 'rows' }));
    }
  });

  it('two groups, two trunks, in one batch', async () => {
    const s = state();
    const batch = [...promptGroup, ...generatedGroup];
    const tree = await gradientsOf(s, batch, { packing: 'tree', microBatchTokens: BUDGET });
    expectSame(tree, await oneAtATime(s, batch, {}));
    expect(tree.computedTokens).toBe(treeTokenCount(batch, BUDGET));
    expect(tree.computedTokens).toBe(treeTokenCount(promptGroup, BUDGET) + treeTokenCount(generatedGroup, BUDGET));
  });

  it('a batch without a shared trunk trains as before', async () => {
    const s = state();
    const apart = [0, 1, 2].map((i) => sample([prompt(text(40, 100 + i)), gen(text(60, 200 + i))], i - 1));
    const tree = await gradientsOf(s, apart, { packing: 'tree', microBatchTokens: BUDGET });
    expect(tree.microBatches).toBe(packTreeMicroBatches(apart, BUDGET).length);
    expect(tree.computedTokens).toBe(withoutTrunks(apart));
    expectSame(tree, await gradientsOf(s, apart, { packing: 'rows' }));
  });

  it('LoRA adapters get the gradients of rows behind a trunk', async () => {
    const base = toParams(initWeights(cfg, 4));
    const lora = createLora(cfg, { rank: 4, alpha: 8, targetModules: ['q_proj', 'k_proj', 'v_proj', 'down_proj'] }, base, 3);
    // B starts at 0 (A's gradient vanishes): set it off zero so that both adapters carry a gradient.
    for (const b of Object.values(lora.b)) b.assign(tf.tensor(Float32Array.from({ length: b.size }, () => (rand() - 0.5) * 0.2), b.shape));
    const trainable = loraVariables(lora);
    const s: TrainState = { cfg, params: base, lora, trainable, optimizer: new AdamW(trainable), reference: null };
    // Advantages of one sign: the loss does not cancel to a small total whose float32 rounding reads as a large relative error.
    const group = groupOf([prompt(text(90, 1))], 30, [1.1, 0.6, 0.4, 0.9, 0.2]);
    expectSame(await gradientsOf(s, group, { packing: 'tree', microBatchTokens: BUDGET }), await gradientsOf(s, group, { packing: 'rows' }));
  });

  it('decoupled PPO against a step\'s held starting weights (a later update of the step) gives the rows\' gradients, and releases their trunk', async () => {
    const s = state();
    const startParams = toParams(initWeights(cfg, 8));
    const start = { params: startParams, lora: null, own: Object.values(startParams) };
    const opts = { ...DEFAULT_TRAIN_OPTIONS, normalization: 'token-sum', lossDivisor: 1, loss: 'decoupled-ppo' } as const;
    const held = (over: Partial<TrainOptions>) => readBatchGradients(batchGradients(s, generatedGroup, { ...opts, ...over }, 1, start));
    const rows = await held({ packing: 'rows' });
    await held({ packing: 'tree', microBatchTokens: BUDGET }); // warm: kernels may hold tensors, the caches do not
    const before = tf.memory().numTensors;
    expectSame(await held({ packing: 'tree', microBatchTokens: BUDGET }), rows);
    expect(tf.memory().numTensors).toBe(before);
    // The held weights are what the ratio is taken against: against the current ones the gradients differ.
    expect(relativeError((await gradientsOf(s, generatedGroup, { packing: 'rows', loss: 'decoupled-ppo' })).grads, rows.grads)).toBeGreaterThan(TOLERANCE);
  });

  it('leaves no tensor behind: the trunk\'s keys, their variables and summed gradients are released', async () => {
    const s = state();
    s.reference = toParams(initWeights(cfg, 8));
    const opts = { packing: 'tree', microBatchTokens: BUDGET, klCoef: 0.1, loss: 'decoupled-ppo' } as const;
    await gradientsOf(s, generatedGroup, opts); // warm: caches (masks, layouts) hold no tensors, but kernels may
    const before = tf.memory().numTensors;
    await gradientsOf(s, [...generatedGroup, ...promptGroup], opts);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('the trunk\'s own entries keep their samples\' advantages (the check can fail)', async () => {
    const s = state();
    const rows = await gradientsOf(s, generatedGroup, { packing: 'rows' });
    // Another advantage on the trunk's generated turn of one sample only: the trunk's tokens are shared, its entries are not.
    const changed = generatedGroup.map((x, i) => (i === 1 ? { ...x, advantages: x.advantages.map((a, t) => (t < 80 ? -a : a)) } : x));
    expect(relativeError((await gradientsOf(s, changed, { packing: 'tree', microBatchTokens: BUDGET })).grads, rows.grads)).toBeGreaterThan(TOLERANCE);
  });
});
