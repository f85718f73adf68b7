/**
 * Successive halving over a seeded sample of arms, on rungs of growing step budgets (minSteps, minSteps·eta, …, the
 * stage's full steps). Synchronous: a rung's top ⌈n/eta⌉ arms go on once the whole rung has finished. Asynchronous
 * (ASHA, Li et al. 2020): an arm goes on as soon as it ranks in the top ⌊n/eta⌋ of the n arms finished at its rung
 * so far. A promotion extends the same arm (`continues`) to the next rung's budget. Arms whose every run failed rank
 * last (-Infinity) and are never promoted. Both respect parallelArms and are pure functions of the runs shown.
 */
import type { ArmProposal, ArmResult, BestArm, SearchSpace, SearchStrategy, StrategyContext, TrialOutcome } from './types.ts';
import {
  armResult,
  bestResult,
  enumerateSpace,
  indexRuns,
  isInFlight,
  listedSpaceSize,
  nameArms,
  rankResults,
  runKey,
  sampleDistinctParams,
  seededRandom,
  wasProposed,
  type NamedArm,
  type RunIndex,
} from './space.ts';

export interface SuccessiveHalvingOptions { space: SearchSpace; trials: number; eta: number; minSteps: number; asynchronous: boolean }

/** Any list-space point count (gridValues ignores it for lists); named so enumerateSpace reads as "lists only". */
const LIST_ONLY_POINTS = 1;

/** The rungs' step budgets: minSteps·eta^i (rounded, strictly increasing) below `steps`, then exactly `steps`. */
export function rungSteps(minSteps: number, eta: number, steps: number): number[] {
  const rungs: number[] = [];
  for (let i = 0; ; i++) {
    const budget = Math.round(minSteps * eta ** i);
    if (budget >= steps) break;
    if (rungs.length === 0 || budget > rungs[rungs.length - 1]) rungs.push(budget);
  }
  rungs.push(steps);
  return rungs;
}

/** The starting arms: the whole space when it is lists only and no bigger than `trials`, else a seeded sample. */
export function initialArms(space: SearchSpace, trials: number, seed: number): NamedArm[] {
  const size = listedSpaceSize(space);
  if (size !== null && size <= trials) return nameArms(enumerateSpace(space, LIST_ONLY_POINTS));
  return nameArms(sampleDistinctParams(space, trials, seededRandom(seed)));
}

function hasRealMetric(result: ArmResult): boolean {
  return result.metric !== null && Number.isFinite(result.metric);
}

function proposal(arm: NamedArm, steps: number, promoted: boolean): ArmProposal {
  return promoted ? { arm: arm.arm, params: arm.params, steps, continues: arm.arm } : { arm: arm.arm, params: arm.params, steps };
}

/** Every arm's result at one rung. */
function rungResults(index: RunIndex, arms: readonly NamedArm[], steps: number, seeds: number): ArmResult[] {
  return arms.map((arm) => armResult(index.get(runKey(arm.arm, steps)), arm, steps, seeds));
}

/** How many (arm, rung) pairs are proposed and not yet finished. */
function countInFlight(index: RunIndex, arms: readonly NamedArm[], rungs: readonly number[], seeds: number): number {
  let count = 0;
  for (const steps of rungs) for (const arm of arms) if (isInFlight(index, arm, steps, seeds)) count++;
  return count;
}

/** The best arm at the highest rung where some arm finished with a real metric. */
function bestAtHighestRung(trials: readonly TrialOutcome[], arms: readonly NamedArm[], rungs: readonly number[], seeds: number): BestArm | null {
  const index = indexRuns(trials);
  for (let k = rungs.length - 1; k >= 0; k--) {
    const best = bestResult(rungResults(index, arms, rungs[k], seeds));
    if (best) return best;
  }
  return null;
}

/** Where a synchronous run stands: the rung being run and its members, or done. */
type SyncPosition = { done: true } | { done: false; rung: number; members: NamedArm[] };

/** Replays the synchronous schedule from the runs: walk up the rungs while each is complete, promoting its top ⌈n/eta⌉. */
function syncPosition(index: RunIndex, arms: readonly NamedArm[], rungs: readonly number[], eta: number, seeds: number): SyncPosition {
  let members = [...arms];
  for (let rung = 0; rung < rungs.length; rung++) {
    const results = rungResults(index, members, rungs[rung], seeds);
    if (!results.every((result) => result.finished)) return { done: false, rung, members };
    if (rung === rungs.length - 1) break;
    const keep = Math.ceil(members.length / eta);
    const promoted = new Set(rankResults(results).slice(0, keep).filter(hasRealMetric).map((result) => result.arm));
    members = rankResults(results).filter((result) => promoted.has(result.arm)).map((result) => ({ arm: result.arm, params: result.params }));
    if (members.length === 0) break;
  }
  return { done: true };
}

function createSynchronous(arms: readonly NamedArm[], rungs: readonly number[], eta: number, ctx: StrategyContext): SearchStrategy {
  return {
    name: 'successive-halving',
    next(trials) {
      const index = indexRuns(trials);
      const position = syncPosition(index, arms, rungs, eta, ctx.seeds);
      if (position.done) return { arms: [], done: true };
      const steps = rungs[position.rung];
      const slots = ctx.parallelArms - countInFlight(index, arms, rungs, ctx.seeds);
      const fresh = position.members.filter((arm) => !wasProposed(index, arm.arm, steps));
      return { arms: fresh.slice(0, Math.max(0, slots)).map((arm) => proposal(arm, steps, position.rung > 0)), done: false };
    },
    best: (trials) => bestAtHighestRung(trials, arms, rungs, ctx.seeds),
  };
}

/** ASHA's promotion rule: from the top rung down, the best not-yet-promoted arm in the top ⌊n/eta⌋ of its rung. */
function findPromotion(
  finishedByRung: readonly ArmResult[][],
  rungs: readonly number[],
  eta: number,
  isProposed: (arm: string, steps: number) => boolean,
): ArmProposal | null {
  for (let rung = rungs.length - 2; rung >= 0; rung--) {
    const ranked = rankResults(finishedByRung[rung]);
    const top = ranked.slice(0, Math.floor(ranked.length / eta));
    const candidate = top.find((result) => hasRealMetric(result) && !isProposed(result.arm, rungs[rung + 1]));
    if (candidate) return proposal({ arm: candidate.arm, params: candidate.params }, rungs[rung + 1], true);
  }
  return null;
}

function createAsynchronous(arms: readonly NamedArm[], rungs: readonly number[], eta: number, ctx: StrategyContext): SearchStrategy {
  return {
    name: 'successive-halving',
    next(trials) {
      const index = indexRuns(trials);
      const proposedNow = new Set<string>();
      const isProposed = (arm: string, steps: number) => wasProposed(index, arm, steps) || proposedNow.has(runKey(arm, steps));
      const finishedByRung = rungs.map((steps) => rungResults(index, arms, steps, ctx.seeds).filter((result) => result.finished));
      const inFlight = countInFlight(index, arms, rungs, ctx.seeds);
      const proposals: ArmProposal[] = [];
      while (inFlight + proposals.length < ctx.parallelArms) {
        const fresh = arms.find((arm) => !isProposed(arm.arm, rungs[0]));
        const next = findPromotion(finishedByRung, rungs, eta, isProposed) ?? (fresh ? proposal(fresh, rungs[0], false) : null);
        if (!next) break;
        proposals.push(next);
        proposedNow.add(runKey(next.arm, next.steps));
      }
      return { arms: proposals, done: proposals.length === 0 && inFlight === 0 };
    },
    best: (trials) => bestAtHighestRung(trials, arms, rungs, ctx.seeds),
  };
}

export function createSuccessiveHalvingStrategy(options: SuccessiveHalvingOptions, ctx: StrategyContext): SearchStrategy {
  if (!(options.eta > 1)) throw new Error(`successive-halving: eta must be > 1 (got ${options.eta})`);
  if (!(options.minSteps >= 1)) throw new Error(`successive-halving: minSteps must be >= 1 (got ${options.minSteps})`);
  const arms = initialArms(options.space, options.trials, ctx.seed);
  const rungs = rungSteps(options.minSteps, options.eta, ctx.steps);
  return options.asynchronous ? createAsynchronous(arms, rungs, options.eta, ctx) : createSynchronous(arms, rungs, options.eta, ctx);
}
