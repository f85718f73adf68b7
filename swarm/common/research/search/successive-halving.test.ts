// Successive halving: rungs, who is promoted (synchronously and by ASHA's rule), never twice, done and best.
import { describe, expect, it } from 'vitest';
import type { ArmProposal, Params, SearchStrategy, StrategyContext, TrialOutcome } from './types.ts';
import { createStrategy } from './index.ts';
import { rungSteps } from './successive-halving.ts';

/** Eight arms x=1..8 (a list space no bigger than trials is enumerated). */
const space = { x: { values: [1, 2, 3, 4, 5, 6, 7, 8] } };
const ctx: StrategyContext = { steps: 8, seeds: 2, seed: 11, parallelArms: 8 };
/** Rung 2 favours big x, rung 4 small x, rung 8 big x again: promotions must follow each rung's own ranking. */
const objective = (params: Params, steps: number, seed: number) => (steps === 4 ? -(params.x as number) : (params.x as number)) + seed * 0.1;

function sh(asynchronous: boolean, context: StrategyContext = ctx): SearchStrategy {
  return createStrategy({ strategy: 'successive-halving', space, trials: 8, eta: 2, minSteps: 2, asynchronous }, context);
}

function start(trials: TrialOutcome[], proposals: readonly ArmProposal[], seeds: number): void {
  for (const p of proposals) for (let seed = 0; seed < seeds; seed++) trials.push({ arm: p.arm, params: p.params, seed, steps: p.steps, state: 'running', metric: null });
}

function finish(trials: readonly TrialOutcome[], arm: string, steps: number, metric: (t: TrialOutcome) => number | null): void {
  for (const t of trials) {
    if (t.arm !== arm || t.steps !== steps || t.state !== 'running') continue;
    const m = metric(t);
    Object.assign(t, m === null ? { state: 'failed', metric: null } : { state: 'done', metric: m });
  }
}

/** Runs a strategy to the end, finishing every running arm after each call; returns each call's proposals. */
function runSynchronously(strategy: SearchStrategy, trials: TrialOutcome[], metric: (t: TrialOutcome) => number | null): ArmProposal[][] {
  const calls: ArmProposal[][] = [];
  const seen = new Set<string>();
  for (let call = 0; call < 50; call++) {
    const { arms, done } = strategy.next(trials);
    if (done) return calls;
    for (const a of arms) {
      expect(seen.has(`${a.arm}@${a.steps}`)).toBe(false);
      seen.add(`${a.arm}@${a.steps}`);
    }
    calls.push(arms);
    start(trials, arms, ctx.seeds);
    for (const a of arms) finish(trials, a.arm, a.steps, metric);
  }
  throw new Error('never done');
}

describe('rungSteps', () => {
  it('grows by eta and ends exactly at the full budget', () => {
    expect(rungSteps(2, 2, 8)).toEqual([2, 4, 8]);
    expect(rungSteps(2, 3, 10)).toEqual([2, 6, 10]);
    expect(rungSteps(10, 2, 8)).toEqual([8]);
  });
});

describe('synchronous successive halving', () => {
  it('runs 8 → 4 → 2 arms on rungs 2, 4, 8 and promotes each rung’s top half', () => {
    const trials: TrialOutcome[] = [];
    const calls = runSynchronously(sh(false), trials, (t) => objective(t.params, t.steps, t.seed));
    expect(calls.map((arms) => arms.length)).toEqual([8, 4, 2]);
    expect(calls.map((arms) => arms[0].steps)).toEqual([2, 4, 8]);
    expect(calls[0].every((a) => a.continues === undefined)).toBe(true);
    expect(calls[1].map((a) => a.arm).sort()).toEqual(['x=5', 'x=6', 'x=7', 'x=8']);
    expect(calls[1].every((a) => a.continues === a.arm)).toBe(true);
    expect(calls[2].map((a) => a.arm).sort()).toEqual(['x=5', 'x=6']);
    expect(sh(false).best(trials)).toEqual({ arm: 'x=6', params: { x: 6 }, metric: 6.05 });
  });

  it('waits for the whole rung before promoting, and is pure', () => {
    const strategy = sh(false);
    const trials: TrialOutcome[] = [];
    start(trials, strategy.next([]).arms, ctx.seeds);
    for (const arm of ['x=1', 'x=2', 'x=3', 'x=4', 'x=5', 'x=6', 'x=7']) finish(trials, arm, 2, (t) => objective(t.params, t.steps, t.seed));
    expect(strategy.next(trials)).toEqual({ arms: [], done: false });
    finish(trials, 'x=8', 2, (t) => objective(t.params, t.steps, t.seed));
    const promoted = strategy.next(trials);
    expect(strategy.next(trials)).toEqual(promoted);
    start(trials, promoted.arms, ctx.seeds);
    expect(strategy.next(trials)).toEqual({ arms: [], done: false });
    expect(strategy.best(trials)?.arm).toBe('x=8'); // highest rung reached so far is rung 2
  });

  it('never promotes an arm whose runs all failed, and keeps within parallelArms', () => {
    const trials: TrialOutcome[] = [];
    const strategy = sh(false, { ...ctx, parallelArms: 3 });
    const failing = new Set([8, 7, 6, 5, 4]);
    const calls = runSynchronously(strategy, trials, (t) => (t.steps === 2 && failing.has(t.params.x as number) ? null : objective(t.params, t.steps, t.seed)));
    expect(calls.every((arms) => arms.length <= 3)).toBe(true);
    const rung4 = calls.flat().filter((a) => a.steps === 4).map((a) => a.arm).sort();
    expect(rung4).toEqual(['x=1', 'x=2', 'x=3']);
  });
});

describe('asynchronous successive halving (ASHA)', () => {
  it('promotes as soon as an arm is in the top ⌊n/eta⌋ of its rung, before the rung completes', () => {
    const strategy = sh(true, { ...ctx, seeds: 1, parallelArms: 2 });
    const trials: TrialOutcome[] = [];
    const first = strategy.next(trials);
    expect(first.arms.map((a) => a.arm)).toEqual(['x=1', 'x=2']);
    start(trials, first.arms, 1);
    finish(trials, 'x=1', 2, () => 1);
    // One finished at rung 2: ⌊1/2⌋ = 0 may go on, so a fresh arm fills the slot.
    const second = strategy.next(trials);
    expect(second.arms).toEqual([{ arm: 'x=3', params: { x: 3 }, steps: 2 }]);
    start(trials, second.arms, 1);
    finish(trials, 'x=2', 2, () => 2);
    // Two finished: the top one (x=2) is promoted while x=3 still runs and five arms have not started.
    const third = strategy.next(trials);
    expect(third.arms).toEqual([{ arm: 'x=2', params: { x: 2 }, steps: 4, continues: 'x=2' }]);
    expect(strategy.next(trials)).toEqual(third);
    start(trials, third.arms, 1);
    expect(strategy.next(trials)).toEqual({ arms: [], done: false });
    finish(trials, 'x=3', 2, () => 0);
    // Three finished, ⌊3/2⌋ = 1: x=2 already went on, so the slot takes a fresh arm.
    expect(strategy.next(trials).arms).toEqual([{ arm: 'x=4', params: { x: 4 }, steps: 2 }]);
  });

  it('ends with nothing proposed twice, within parallelArms, and a best from the top rung', () => {
    const strategy = sh(true, { ...ctx, seeds: 1, parallelArms: 3 });
    const trials: TrialOutcome[] = [];
    const seen = new Set<string>();
    for (let call = 0; call < 100; call++) {
      const { arms, done } = strategy.next(trials);
      if (done) break;
      for (const a of arms) {
        expect(seen.has(`${a.arm}@${a.steps}`)).toBe(false);
        seen.add(`${a.arm}@${a.steps}`);
      }
      start(trials, arms, 1);
      expect(trials.filter((t) => t.state === 'running').length).toBeLessThanOrEqual(3);
      const oldest = trials.find((t) => t.state === 'running');
      if (oldest) finish(trials, oldest.arm, oldest.steps, (t) => objective(t.params, t.steps, t.seed));
    }
    expect(strategy.next(trials).done).toBe(true);
    const top = trials.filter((t) => t.steps === 8);
    expect(top.length).toBeGreaterThan(0);
    const best = strategy.best(trials);
    expect(best?.metric).toBe(Math.max(...top.map((t) => t.metric as number)));
  });
});
