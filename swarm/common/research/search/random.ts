/**
 * Random search: `trials` distinct arms drawn (seeded) from the space, all proposed at once at the stage's full
 * budget; done when every one has finished. A small list-only space may yield fewer distinct arms than asked.
 */
import type { SearchSpace, SearchStrategy, StrategyContext } from './types.ts';
import { nameArms, sampleDistinctParams, seededRandom, type NamedArm } from './space.ts';
import { createFixedArmsStrategy } from './grid.ts';

/** The arms random search runs for a seed: the same seed always gives the same arms. */
export function randomArms(space: SearchSpace, trials: number, seed: number): NamedArm[] {
  return nameArms(sampleDistinctParams(space, trials, seededRandom(seed)));
}

export function createRandomStrategy(space: SearchSpace, trials: number, ctx: StrategyContext): SearchStrategy {
  return createFixedArmsStrategy('random', randomArms(space, trials, ctx.seed), ctx);
}
