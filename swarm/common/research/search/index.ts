/**
 * The study stage's search strategies behind one entry point: createStrategy(spec, ctx) checks the spec and the
 * context and builds the grid, random, successive-halving (synchronous or ASHA) or TPE strategy it names.
 */
import type { SearchSpec, SearchStrategy, StrategyContext } from './types.ts';
import { validateSpace } from './space.ts';
import { createGridStrategy } from './grid.ts';
import { createRandomStrategy } from './random.ts';
import { createSuccessiveHalvingStrategy } from './successive-halving.ts';
import { createTpeStrategy } from './tpe.ts';

export type * from './types.ts';
export { armName, seededRandom } from './space.ts';

function requireWholeNumber(what: string, value: number, least: number): void {
  if (!Number.isInteger(value) || value < least) throw new Error(`${what} must be a whole number >= ${least} (got ${value})`);
}

function validateContext(ctx: StrategyContext): void {
  requireWholeNumber('steps', ctx.steps, 1);
  requireWholeNumber('seeds', ctx.seeds, 1);
  requireWholeNumber('parallelArms', ctx.parallelArms, 1);
  if (!Number.isFinite(ctx.seed)) throw new Error(`seed must be a finite number (got ${ctx.seed})`);
}

export function createStrategy(spec: SearchSpec, ctx: StrategyContext): SearchStrategy {
  validateContext(ctx);
  validateSpace(spec.space);
  switch (spec.strategy) {
    case 'grid':
      if (spec.pointsPerRange !== undefined) requireWholeNumber('grid: pointsPerRange', spec.pointsPerRange, 1);
      return createGridStrategy(spec.space, spec.pointsPerRange, ctx);
    case 'random':
      requireWholeNumber('random: trials', spec.trials, 1);
      return createRandomStrategy(spec.space, spec.trials, ctx);
    case 'successive-halving':
      requireWholeNumber('successive-halving: trials', spec.trials, 1);
      return createSuccessiveHalvingStrategy(spec, ctx);
    case 'tpe':
      requireWholeNumber('tpe: trials', spec.trials, 1);
      requireWholeNumber('tpe: startupTrials', spec.startupTrials, 0);
      requireWholeNumber('tpe: candidates', spec.candidates, 1);
      return createTpeStrategy(spec, ctx);
  }
}
