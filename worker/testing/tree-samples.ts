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
