/**
 * Pre-registered decision criteria for a study: written down before any run finishes, then evaluated against each
 * arm's final metrics (one number per seed) to say 'met', 'not-met' or 'inconclusive' — with a sentence a reader can
 * check against the numbers. Pure: shared by the peer and the UI.
 */
import { bootstrapDifferenceInterval, hedgesG, mean, permutationTest, tInterval, welchTest } from './stats.ts';

export type DecisionCriterion =
  | { kind: 'difference'; better: string; than: string; minDifference: number; confidence: number; test: 'welch' | 'permutation' }
  | { kind: 'threshold'; arm: string; atLeast: number; confidence: number };

export type DecisionOutcome = 'met' | 'not-met' | 'inconclusive';

export interface DecisionResult {
  outcome: DecisionOutcome;
  /** One sentence a reader can check: what was compared, the numbers, and why this outcome. */
  statement: string;
  /** For 'difference': mean(better) - mean(than) with its CI, p, effect size; for 'threshold': the arm's mean and CI. */
  estimate: number | null;
  low: number | null;
  high: number | null;
  p: number | null;
  effectSize: number | null;
  /** Counts per arm used. */
  n: Record<string, number>;
}

/** The arm name a threshold criterion uses for "whichever arm did best"; the caller resolves it to a real arm. */
export const BEST_ARM = 'best';
/** Significant digits in statements: enough to check a claim, few enough to read. */
const STATEMENT_DIGITS = 3;
/** Fewest runs per arm from which a spread, hence any interval, can be estimated. */
const MIN_RUNS = 2;

/** A number rounded to 3 significant digits for a statement (no trailing zeros; "∞" for non-finite bounds). */
function formatNumber(x: number): string {
  if (!Number.isFinite(x)) return x > 0 ? '∞' : x < 0 ? '−∞' : 'NaN';
  return String(Number(x.toPrecision(STATEMENT_DIGITS)));
}

/** A confidence level as a percentage: 0.95 → "95%", 0.975 → "97.5%". */
function formatConfidence(confidence: number): string {
  return `${Number((confidence * 100).toPrecision(6))}%`;
}

function testName(test: 'welch' | 'permutation'): string {
  return test === 'welch' ? "Welch's t" : 'bootstrap CI, permutation test';
}

/** The criterion in words, as written before any result. */
export function describeCriterion(criterion: DecisionCriterion): string {
  const level = formatConfidence(criterion.confidence);
  if (criterion.kind === 'difference') {
    const { better, than, minDifference, test } = criterion;
    return `${better}'s metric exceeds ${than}'s by ≥ ${minDifference}, and the ${level} CI of the difference excludes 0 (${testName(test)})`;
  }
  const subject = criterion.arm === BEST_ARM ? "the best arm's metric" : `${criterion.arm}'s metric`;
  return `${subject} is at least ${criterion.atLeast}: the lower end of its ${level} CI (Student's t) is ≥ ${criterion.atLeast}`;
}

/** Evaluates a pre-registered criterion against per-arm final metrics (one number per seed/run). */
export function decide(criterion: DecisionCriterion, metrics: Record<string, number[]>, armResolved?: string): DecisionResult {
  if (!(criterion.confidence > 0 && criterion.confidence < 1)) {
    throw new RangeError(`criterion confidence must be in (0, 1), got ${criterion.confidence}`);
  }
  return criterion.kind === 'difference' ? decideDifference(criterion, metrics) : decideThreshold(criterion, metrics, armResolved);
}

type DifferenceCriterion = Extract<DecisionCriterion, { kind: 'difference' }>;
type ThresholdCriterion = Extract<DecisionCriterion, { kind: 'threshold' }>;

/** An 'inconclusive' result with no numbers, for when the data cannot be evaluated at all. */
function unevaluated(statement: string, n: Record<string, number>, estimate: number | null = null): DecisionResult {
  return { outcome: 'inconclusive', statement, estimate, low: null, high: null, p: null, effectSize: null, n };
}

/** Arm counts, 0 for an arm with no metrics. */
function countsOf(arms: readonly string[], metrics: Record<string, number[]>): Record<string, number> {
  return Object.fromEntries(arms.map((arm) => [arm, metrics[arm]?.length ?? 0]));
}

/** The statement for arms that are missing or have too few runs, or null when every arm can be evaluated. */
function insufficientData(arms: readonly string[], metrics: Record<string, number[]>): string | null {
  const missing = arms.filter((arm) => !Object.hasOwn(metrics, arm));
  if (missing.length > 0) return `Inconclusive: no metrics for arm ${missing.map((arm) => `"${arm}"`).join(' or ')}.`;
  const few = arms.filter((arm) => metrics[arm].length < MIN_RUNS);
  if (few.length > 0) {
    const counts = few.map((arm) => `"${arm}" has ${metrics[arm].length}`).join(', ');
    return `Inconclusive: too few runs to estimate a spread (${counts}; at least ${MIN_RUNS} needed per arm).`;
  }
  return null;
}

/** The CI and p-value of mean(better) − mean(than) by the criterion's test. */
function differenceInterval(criterion: DifferenceCriterion, than: number[], better: number[]): { low: number | null; high: number | null; p: number | null } {
  if (criterion.test === 'welch') {
    const { low, high, p } = welchTest(than, better, criterion.confidence);
    return { low, high, p };
  }
  const { low, high } = bootstrapDifferenceInterval(than, better, { confidence: criterion.confidence });
  return { low, high, p: permutationTest(than, better).p };
}

/**
 * met ⇔ estimate ≥ minDifference and low > 0; not-met ⇔ high < minDifference or high ≤ 0; else inconclusive.
 * `confirmedBy` is the exact permutation p where the CI is a bootstrap one: the percentile bootstrap is too narrow at a
 * few seeds (its false 'met' rate at n = 3 per arm is ~8% instead of 2.5%), so 'met' also needs p < 1 − confidence,
 * which a Welch CI implies by construction.
 */
function differenceOutcome(
  estimate: number,
  low: number,
  high: number,
  minDifference: number,
  confirmedBy: { p: number | null; alpha: number } | null,
): { outcome: DecisionOutcome; why: string } {
  if (estimate >= minDifference && low > 0) {
    if (confirmedBy && !(confirmedBy.p !== null && confirmedBy.p < confirmedBy.alpha)) {
      const p = confirmedBy.p === null ? 'unavailable' : formatNumber(confirmedBy.p);
      return { outcome: 'inconclusive', why: `the bootstrap CI excludes 0 but the exact permutation p (${p}) is not below ${formatNumber(confirmedBy.alpha)}` };
    }
    return { outcome: 'met', why: `the difference is at least ${formatNumber(minDifference)} and its CI excludes 0` };
  }
  if (high <= 0) return { outcome: 'not-met', why: `the CI's upper end ${formatNumber(high)} rules out any improvement` };
  if (high < minDifference) {
    return { outcome: 'not-met', why: `the CI's upper end ${formatNumber(high)} rules out a difference of ${formatNumber(minDifference)}` };
  }
  const because = low > 0 ? `the estimate is below ${formatNumber(minDifference)}` : 'the CI includes 0';
  const ruledIn = minDifference > 0 ? `a difference of ${formatNumber(minDifference)} or more` : 'an improvement';
  return { outcome: 'inconclusive', why: `${because}, and its upper end ${formatNumber(high)} does not rule out ${ruledIn}` };
}

function decideDifference(criterion: DifferenceCriterion, metrics: Record<string, number[]>): DecisionResult {
  const { better, than, minDifference } = criterion;
  const arms = [better, than];
  const n = countsOf(arms, metrics);
  const problem = insufficientData(arms, metrics);
  if (problem) return unevaluated(problem, n);
  const estimate = mean(metrics[better]) - mean(metrics[than]);
  const { low, high, p } = differenceInterval(criterion, metrics[than], metrics[better]);
  const effectSize = hedgesG(metrics[than], metrics[better]);
  if (low === null || high === null) return unevaluated(`Inconclusive: no CI could be computed for ${better} − ${than}.`, n, estimate);
  const confirmedBy = criterion.test === 'permutation' ? { p, alpha: 1 - criterion.confidence } : null;
  const { outcome, why } = differenceOutcome(estimate, low, high, minDifference, confirmedBy);
  const details = [
    `${formatConfidence(criterion.confidence)} CI ${formatNumber(low)} to ${formatNumber(high)}`,
    testName(criterion.test),
    p === null ? null : `p = ${formatNumber(p)}`,
    effectSize === null ? null : `g = ${formatNumber(effectSize)}`,
    `n = ${n[better]} vs ${n[than]}`,
  ].filter((part) => part !== null);
  const statement = `${better} − ${than} = ${formatNumber(estimate)} (${details.join(', ')}): ${outcomeWord(outcome)}, because ${why}.`;
  return { outcome, statement, estimate, low, high, p, effectSize, n };
}

/** met ⇔ low ≥ atLeast; not-met ⇔ high < atLeast; else inconclusive. */
function thresholdOutcome(low: number, high: number, atLeast: number): { outcome: DecisionOutcome; why: string } {
  const bound = formatNumber(atLeast);
  if (low >= atLeast) return { outcome: 'met', why: `the CI's lower end is at least ${bound}` };
  if (high < atLeast) return { outcome: 'not-met', why: `the CI's upper end is below ${bound}` };
  return { outcome: 'inconclusive', why: `the CI straddles ${bound}` };
}

function decideThreshold(criterion: ThresholdCriterion, metrics: Record<string, number[]>, armResolved?: string): DecisionResult {
  const arm = criterion.arm === BEST_ARM && armResolved !== undefined ? armResolved : criterion.arm;
  if (criterion.arm === BEST_ARM && armResolved === undefined && !Object.hasOwn(metrics, BEST_ARM)) {
    return unevaluated('Inconclusive: the criterion names the best arm, but no best arm was resolved.', {});
  }
  const subject = criterion.arm === BEST_ARM ? `${arm} (the best arm)` : arm;
  const n = countsOf([arm], metrics);
  const problem = insufficientData([arm], metrics);
  if (problem) return unevaluated(problem, n);
  const interval = tInterval(metrics[arm], criterion.confidence);
  const { low, high } = interval;
  const estimate = interval.mean;
  if (low === null || high === null || estimate === null) return unevaluated(`Inconclusive: no CI could be computed for ${arm}.`, n);
  const { outcome, why } = thresholdOutcome(low, high, criterion.atLeast);
  const ci = `${formatConfidence(criterion.confidence)} CI ${formatNumber(low)} to ${formatNumber(high)}, Student's t, n = ${n[arm]}`;
  const statement = `Mean of ${subject} = ${formatNumber(estimate)} (${ci}) against a threshold of ${formatNumber(criterion.atLeast)}: ${outcomeWord(outcome)}, because ${why}.`;
  return { outcome, statement, estimate, low, high, p: null, effectSize: null, n };
}

function outcomeWord(outcome: DecisionOutcome): string {
  return outcome === 'met' ? 'met' : outcome === 'not-met' ? 'not met' : 'inconclusive';
}
