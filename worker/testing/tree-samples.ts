/** Samples for the tree-training tests: prompt (mask 0) and generated (mask 1) parts of made-up tokens. */
import type { TrainSample } from '../common/engine.ts';

export interface SamplePart {
  tokens: number[];
  generated: boolean;
}

/** `n` made-up token ids (1–250), the same for the same seed: prefixes shared by construction. */
export const text = (n: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((i * 37 + seed * 101) % 250));
export const prompt = (tokens: number[]): SamplePart => ({ tokens, generated: false });
export const gen = (tokens: number[]): SamplePart => ({ tokens, generated: true });

/** A sample of `parts` with one advantage; old logprobs off the current policy, so some ratios leave the clip range. */
export function treeSample(parts: SamplePart[], advantage: number, rand: () => number): TrainSample {
  const tokens = parts.flatMap((p) => p.tokens);
  const lossMask = parts.flatMap((p) => p.tokens.map(() => (p.generated ? 1 : 0)));
  lossMask[0] = 0;
  return {
    tokens,
    lossMask,
    advantages: lossMask.map((m) => (m ? advantage : 0)),
    oldLogprobs: lossMask.map((m) => (m ? -5.6 + (rand() - 0.5) * 1.2 : 0)),
  };
}

/**
 * A group behind a 70-token opening (a prompt, a turn every sample generated alike, a prompt), then 30 tokens of
 * its own each: too long for one micro-batch of TRUNK_BUDGET tokens, so the opening becomes a trunk.
 */
export function trunkSamples(): TrainSample[] {
  const opening = [...text(40, 6), ...text(20, 7), ...text(10, 8)];
  return [1, -0.5, 0.3, -0.8].map((advantage, i) => {
    const tokens = [...opening, ...text(30, 10 + i)];
    const lossMask = tokens.map((_, t) => ((t >= 40 && t < 60) || t >= 70 ? 1 : 0));
    return { tokens, lossMask, advantages: lossMask.map((m) => m * advantage), oldLogprobs: lossMask.map((m, t) => (m ? -5.5 + (t % 7) * 0.1 : 0)) };
  });
}
export const TRUNK_BUDGET = 120;
