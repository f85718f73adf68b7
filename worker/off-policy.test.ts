/**
 * The off-policy losses (worker/losses.ts) through the engine's trainStep, checked against what their formulas give
 * in cases where the answer is known exactly: fresh episodes (behaviour = proximal policy) make decoupled PPO plain
 * PPO; stale behaviour logprobs weight it by the capped importance ratio; truncated IS is the cap times the NLL
 * gradient where every ratio exceeds the cap, and PPO's unclipped gradient where none does.
 */
import { describe, expect, it } from 'vitest';
import type { TrainOptions, TrainSample } from './common/engine.ts';
import type { LocalEngine } from './engine.ts';
import { tinyByteConfig } from './testing/configs.ts';
import { wasmEngines } from './testing/wasm-engines.ts';

const cfg = tinyByteConfig();
const engine = wasmEngines('off-policy', cfg, 6);

const tokens = Array.from({ length: 24 }, (_, i) => (i * 11 + 3) % 250);
const mask = tokens.map((_, i) => (i >= 8 ? 1 : 0));
const advantages = mask.map((m, i) => (m ? (i % 3) - 0.8 : 0));
/** lr 0: the step reports loss and gradient norm and leaves the weights alone. */
const measure = { learningRate: 0, weightDecay: 0, normalization: 'token-sum', lossDivisor: 1, maxGradNorm: 1e9 } as const;

function sample(oldLogprobs: number[], adv = advantages): TrainSample {
  return { tokens, lossMask: mask, advantages: adv, oldLogprobs };
}

async function policyLogprobs(e: LocalEngine): Promise<number[]> {
  return (await e.logprobs([tokens]))[0].map((lp, i) => (mask[i] ? lp : 0));
}

const step = (e: LocalEngine, s: TrainSample, over: Partial<TrainOptions>) => e.trainStep([s], { ...measure, ...over });
const relative = (a: number, b: number) => Math.abs(a - b) / Math.abs(b);

describe('off-policy losses', () => {
  it('decoupled PPO on fresh episodes is PPO', async () => {
    const e = await engine();
    const fresh = sample(await policyLogprobs(e));
    const ppo = await step(e, fresh, { loss: 'ppo' });
    const decoupled = await step(e, fresh, { loss: 'decoupled-ppo' });
    expect(Math.abs(ppo.loss)).toBeGreaterThan(1e-3);
    expect(relative(decoupled.loss, ppo.loss)).toBeLessThan(1e-4);
    expect(relative(decoupled.gradNorm, ppo.gradNorm)).toBeLessThan(1e-4);
  });

  it('decoupled PPO weights stale tokens by the capped proximal ÷ behaviour ratio, around the proximal policy', async () => {
    const e = await engine();
    const current = await policyLogprobs(e);
    // Behaviour logprobs 0.3 below the current ones: every weight is e^0.3 ≈ 1.35, under the cap.
    const stale = sample(current.map((lp, i) => (mask[i] ? lp - 0.3 : 0)));
    const decoupled = await step(e, stale, { loss: 'decoupled-ppo', importanceCap: 2 });
    // At the proximal weights every ratio is 1: the loss is −Σ w·A.
    const want = -advantages.reduce((sum, a, i) => sum + (mask[i] ? Math.exp(0.3) * a : 0), 0);
    expect(relative(decoupled.loss, want)).toBeLessThan(1e-3);
    expect(decoupled.clipFraction).toBe(0);
    // Plain PPO on the same stale tokens clips some of them (its ratio is e^0.3 > 1.2): a different update.
    const ppo = await step(e, stale, { loss: 'ppo' });
    expect(ppo.clipFraction).toBeGreaterThan(0);
    // A cap of 1 cuts every weight back to 1: the loss is then PPO's on fresh tokens.
    const capped = await step(e, stale, { loss: 'decoupled-ppo', importanceCap: 1 });
    const freshPpo = await step(e, sample(current), { loss: 'ppo' });
    expect(relative(capped.loss, freshPpo.loss)).toBeLessThan(1e-4);
    expect(relative(capped.gradNorm, freshPpo.gradNorm)).toBeLessThan(1e-4);
  });

  it('truncated IS: the cap times the NLL gradient above the cap, PPO’s unclipped gradient below it', async () => {
    const e = await engine();
    const current = await policyLogprobs(e);
    const ones = mask.map((m) => (m ? 1 : 0));
    // Behaviour logprobs far below: every ratio is e^5, cut to the cap; with A = 1 the loss is cap × NLL.
    const far = sample(current.map((lp, i) => (mask[i] ? lp - 5 : 0)), ones);
    const tis = await step(e, far, { loss: 'truncated-is', importanceCap: 3 });
    const sft = await step(e, far, { loss: 'sft' });
    expect(tis.clipFraction).toBe(1);
    expect(relative(tis.loss, 3 * sft.loss)).toBeLessThan(1e-4);
    expect(relative(tis.gradNorm, 3 * sft.gradNorm)).toBeLessThan(1e-4);
    // Ratios of e^0.5 under a large cap: the gradient of −ρ·A, PPO's with the clip range opened wide.
    const near = sample(current.map((lp, i) => (mask[i] ? lp - 0.5 : 0)));
    const tisNear = await step(e, near, { loss: 'truncated-is', importanceCap: 1e6 });
    const unclipped = await step(e, near, { loss: 'ppo', clipLow: 1, clipHigh: 1e6 });
    expect(tisNear.clipFraction).toBe(0);
    expect(relative(tisNear.gradNorm, unclipped.gradNorm)).toBeLessThan(1e-4);
  });

  it('refuses an importance cap below 1', async () => {
    const e = await engine();
    await expect(step(e, sample(await policyLogprobs(e)), { loss: 'truncated-is', importanceCap: 0.5 })).rejects.toMatchObject({ name: 'InvalidTrainOptionsError' });
  });
});
