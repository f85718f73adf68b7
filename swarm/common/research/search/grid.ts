/**
 * Grid search: the cartesian product of the space (ranges become evenly, or log-, spaced points), every arm proposed
 * at once at the stage's full budget. Also the shared runner of any fixed list of arms (random search reuses it).
 */
import type { ArmProposal, SearchSpace, SearchStrategy, StrategyContext, TrialOutcome } from './types.ts';
import { armResult, bestResult, enumerateSpace, indexRuns, nameArms, runKey, wasProposed, type NamedArm } from './space.ts';

/** Points a range becomes when the spec does not say. */
export const DEFAULT_POINTS_PER_RANGE = 3;

/**
 * A strategy that runs a fixed list of arms, all at `ctx.steps`, proposing every arm not yet on record (grid and
 * random may ignore parallelArms: the scheduler queues them). Done when every arm has finished.
 */
export function createFixedArmsStrategy(name: 'grid' | 'random', arms: readonly NamedArm[], ctx: StrategyContext): SearchStrategy {
  const results = (trials: readonly TrialOutcome[]) => {
    const index = indexRuns(trials);
    return arms.map((arm) => armResult(index.get(runKey(arm.arm, ctx.steps)), arm, ctx.steps, ctx.seeds));
  };
  return {
    name,
    next(trials) {
      const index = indexRuns(trials);
      const proposals: ArmProposal[] = arms
        .filter((arm) => !wasProposed(index, arm.arm, ctx.steps))
        .map((arm) => ({ arm: arm.arm, params: arm.params, steps: ctx.steps }));
      const done = proposals.length === 0 && results(trials).every((result) => result.finished);
      return { arms: proposals, done };
    },
    best: (trials) => bestResult(results(trials)),
  };
}

/** The grid's arms, named: knobs sorted, the first knob varying slowest. */
export function gridArms(space: SearchSpace, pointsPerRange = DEFAULT_POINTS_PER_RANGE): NamedArm[] {
  return nameArms(enumerateSpace(space, pointsPerRange));
}

export function createGridStrategy(space: SearchSpace, pointsPerRange: number | undefined, ctx: StrategyContext): SearchStrategy {
  return createFixedArmsStrategy('grid', gridArms(space, pointsPerRange ?? DEFAULT_POINTS_PER_RANGE), ctx);
}
