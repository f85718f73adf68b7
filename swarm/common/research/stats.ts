/**
 * Statistics for the automated research system: a study compares arms of RL training runs over a handful of seeds,
 * so everything here is small-sample (Student's t, Welch's test, exact permutation tests, seeded bootstraps).
 * Pure and deterministic: it runs in the peer (Node) and in the UI (browser), and the same data always give the same
 * numbers. Results that cannot be computed are `null`, never NaN or ±Infinity, so they survive JSON.
 */

// ---------------------------------------------------------------------------------------------------------------
// Descriptive statistics
// ---------------------------------------------------------------------------------------------------------------

/** Arithmetic mean; NaN for an empty sample (callers guard n before using it). */
export function mean(xs: readonly number[]): number {
  let sum = 0;
  for (const x of xs) sum += x;
  return sum / xs.length;
}

/** Unbiased sample variance (divides by n − 1): the seeds are a sample of the runs the arm could produce. */
export function sampleVariance(xs: readonly number[]): number {
  const m = mean(xs);
  let squares = 0;
  for (const x of xs) squares += (x - m) ** 2;
  return squares / (xs.length - 1);
}

/** Sample standard deviation (n − 1). */
export function sampleSd(xs: readonly number[]): number {
  return Math.sqrt(sampleVariance(xs));
}

// ---------------------------------------------------------------------------------------------------------------
// Special functions
// ---------------------------------------------------------------------------------------------------------------

/** Lanczos approximation parameters (g = 7, 9 terms): log-gamma to ~1e-15 relative. */
const LANCZOS_G = 7;
const LANCZOS_COEFFICIENTS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
  12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
];
/** ln √(2π), the constant term of Stirling's / Lanczos' formula. */
const LOG_SQRT_TWO_PI = 0.5 * Math.log(2 * Math.PI);

/** ln Γ(x) for x > 0 (Lanczos); reflection for x < 0.5 keeps the accuracy near 0. */
function logGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - logGamma(1 - x);
  const z = x - 1;
  let series = LANCZOS_COEFFICIENTS[0];
  for (let i = 1; i < LANCZOS_COEFFICIENTS.length; i++) series += LANCZOS_COEFFICIENTS[i] / (z + i);
  const t = z + LANCZOS_G + 0.5;
  return LOG_SQRT_TWO_PI + (z + 0.5) * Math.log(t) - t + Math.log(series);
}

/** Continued-fraction iterations allowed: convergence takes O(√max(a, b)) terms, so this covers df up to ~10⁷. */
const BETA_CF_MAX_ITERATIONS = 20_000;
/** Relative change at which the continued fraction has converged. */
const BETA_CF_EPSILON = 1e-16;
/** Guard against division by zero in Lentz's algorithm. */
const BETA_CF_TINY = 1e-300;

/** Continued fraction for the incomplete beta function (modified Lentz; Numerical Recipes §6.4). */
function betaContinuedFraction(x: number, a: number, b: number): number {
  const qab = a + b;
  const qap = a + 1;
  const qam = a - 1;
  let c = 1;
  let d = 1 - (qab * x) / qap;
  if (Math.abs(d) < BETA_CF_TINY) d = BETA_CF_TINY;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= BETA_CF_MAX_ITERATIONS; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < BETA_CF_TINY) d = BETA_CF_TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < BETA_CF_TINY) c = BETA_CF_TINY;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (qab + m) * x) / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < BETA_CF_TINY) d = BETA_CF_TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < BETA_CF_TINY) c = BETA_CF_TINY;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < BETA_CF_EPSILON) break;
  }
  return h;
}

/**
 * Regularized incomplete beta I_x(a, b), with y = 1 − x passed in exactly by the caller so that tails near x = 1 keep
 * their precision. Uses the continued fraction on whichever side converges fast.
 */
function regularizedIncompleteBeta(x: number, y: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (y <= 0) return 1;
  const logFront = logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(y);
  const front = Math.exp(logFront);
  if (x < (a + 1) / (a + b + 2)) return (front * betaContinuedFraction(x, a, b)) / a;
  return 1 - (front * betaContinuedFraction(y, b, a)) / b;
}

function assertDegreesOfFreedom(df: number): void {
  if (!(df > 0) || !Number.isFinite(df)) throw new RangeError(`degrees of freedom must be finite and > 0, got ${df}`);
}

/** CDF of Student's t with df degrees of freedom (df may be fractional, as Welch's df is). */
export function studentTCdf(t: number, df: number): number {
  assertDegreesOfFreedom(df);
  if (Number.isNaN(t)) return NaN;
  if (t === Infinity) return 1;
  if (t === -Infinity) return 0;
  // P(T ≤ −|t|) = ½ I_x(df/2, ½) with x = df / (df + t²); 1 − x computed directly for precision near t = 0.
  const denominator = df + t * t;
  const lowerTail = 0.5 * regularizedIncompleteBeta(df / denominator, (t * t) / denominator, df / 2, 0.5);
  return t > 0 ? 1 - lowerTail : lowerTail;
}

/** Density of Student's t, the derivative Newton's method needs in `studentTQuantile`. */
function studentTDensity(t: number, df: number): number {
  const logNorm = logGamma((df + 1) / 2) - logGamma(df / 2) - 0.5 * Math.log(df * Math.PI);
  return Math.exp(logNorm - ((df + 1) / 2) * Math.log1p((t * t) / df));
}

/** Newton steps allowed before giving up (bisection fallback guarantees progress; ~10 suffice in practice). */
const QUANTILE_MAX_ITERATIONS = 300;
/** Relative step size at which the quantile has converged (far below the 1e-6 the callers need). */
const QUANTILE_RELATIVE_TOLERANCE = 1e-14;

/**
 * Inverse CDF of Student's t: the t with P(T ≤ t) = p. Solves on the lower tail (where the CDF is computed without
 * cancellation) by Newton's method safeguarded by a bisection bracket, then mirrors for p > ½.
 */
export function studentTQuantile(p: number, df: number): number {
  assertDegreesOfFreedom(df);
  if (!(p >= 0 && p <= 1)) throw new RangeError(`probability must be in [0, 1], got ${p}`);
  if (p === 0) return -Infinity;
  if (p === 1) return Infinity;
  if (p === 0.5) return 0;
  const tail = Math.min(p, 1 - p);
  const t = lowerTailTQuantile(tail, df);
  return p < 0.5 ? t : -t;
}

/** The negative t with P(T ≤ t) = tail, for 0 < tail < ½. */
function lowerTailTQuantile(tail: number, df: number): number {
  let high = 0; // CDF(0) = ½ > tail
  let low = Math.min(normalQuantile(tail), -1); // t tails are heavier than normal: widen until the bracket holds
  while (studentTCdf(low, df) > tail) {
    high = low;
    low *= 2;
  }
  let t = (low + high) / 2;
  for (let i = 0; i < QUANTILE_MAX_ITERATIONS; i++) {
    const excess = studentTCdf(t, df) - tail;
    if (excess === 0) return t;
    if (excess > 0) high = t;
    else low = t;
    let next = t - excess / studentTDensity(t, df);
    if (!(next > low && next < high)) next = (low + high) / 2;
    if (Math.abs(next - t) <= QUANTILE_RELATIVE_TOLERANCE * Math.max(1, Math.abs(t))) return next;
    t = next;
  }
  return t;
}

/** Acklam's rational approximation of the normal quantile (relative error < 1.15e-9). */
const ACKLAM_A = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239];
const ACKLAM_B = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
const ACKLAM_C = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
const ACKLAM_D = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
/** Below this p (and above 1 − it) Acklam switches from the central to the tail approximation. */
const ACKLAM_TAIL_P = 0.02425;

/** Evaluates a polynomial with coefficients from the highest power down (Horner). */
function horner(coefficients: readonly number[], x: number): number {
  let value = 0;
  for (const c of coefficients) value = value * x + c;
  return value;
}

/** Inverse CDF of the standard normal (Acklam); also the starting point of `studentTQuantile`. */
export function normalQuantile(p: number): number {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`probability must be in [0, 1], got ${p}`);
  if (p === 0) return -Infinity;
  if (p === 1) return Infinity;
  if (p < ACKLAM_TAIL_P) {
    const q = Math.sqrt(-2 * Math.log(p));
    return horner(ACKLAM_C, q) / (horner(ACKLAM_D, q) * q + 1);
  }
  if (p > 1 - ACKLAM_TAIL_P) {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    return -horner(ACKLAM_C, q) / (horner(ACKLAM_D, q) * q + 1);
  }
  const q = p - 0.5;
  const r = q * q;
  return (horner(ACKLAM_A, r) * q) / (horner(ACKLAM_B, r) * r + 1);
}

// ---------------------------------------------------------------------------------------------------------------
// Intervals and tests
// ---------------------------------------------------------------------------------------------------------------

function assertConfidence(confidence: number): void {
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`confidence must be in (0, 1), got ${confidence}`);
}

/** The two-sided critical t for a confidence level: e.g. 0.95 → the 0.975 quantile. */
function criticalT(confidence: number, df: number): number {
  return studentTQuantile(1 - (1 - confidence) / 2, df);
}

export interface TInterval {
  n: number;
  /** null for an empty sample. */
  mean: number | null;
  /** null when n < 2: one seed says nothing about spread. */
  low: number | null;
  high: number | null;
  halfWidth: number | null;
}

/** Confidence interval of the mean from Student's t: the interval for "what this arm would average over seeds". */
export function tInterval(xs: readonly number[], confidence = 0.95): TInterval {
  assertConfidence(confidence);
  const n = xs.length;
  if (n === 0) return { n, mean: null, low: null, high: null, halfWidth: null };
  const m = mean(xs);
  if (n < 2) return { n, mean: m, low: null, high: null, halfWidth: null };
  const halfWidth = criticalT(confidence, n - 1) * Math.sqrt(sampleVariance(xs) / n);
  return { n, mean: m, low: m - halfWidth, high: m + halfWidth, halfWidth };
}

export interface WelchResult {
  /** mean(b) − mean(a); null when either sample is empty. */
  difference: number | null;
  /** CI of the difference; null when either sample has fewer than 2 values. */
  low: number | null;
  high: number | null;
  /** Welch's t statistic, positive when b > a; null also when both samples are constant with different means (t = ±∞). */
  t: number | null;
  /** Welch–Satterthwaite degrees of freedom; null also when both samples are constant (0/0). */
  df: number | null;
  /** Two-sided p-value. */
  p: number | null;
}

/** Welch's unequal-variance t-test of b vs a: arms of RL runs rarely share a variance, so no pooling. */
export function welchTest(a: readonly number[], b: readonly number[], confidence = 0.95): WelchResult {
  assertConfidence(confidence);
  const difference = a.length > 0 && b.length > 0 ? mean(b) - mean(a) : null;
  if (difference === null || a.length < 2 || b.length < 2) return { difference, low: null, high: null, t: null, df: null, p: null };
  const squaredErrorA = sampleVariance(a) / a.length;
  const squaredErrorB = sampleVariance(b) / b.length;
  const squaredError = squaredErrorA + squaredErrorB;
  if (squaredError === 0) {
    // No spread at all: the difference is known exactly, so it is either nothing (p = 1) or certain (p = 0).
    return { difference, low: difference, high: difference, t: difference === 0 ? 0 : null, df: null, p: difference === 0 ? 1 : 0 };
  }
  const df = squaredError ** 2 / (squaredErrorA ** 2 / (a.length - 1) + squaredErrorB ** 2 / (b.length - 1));
  const standardError = Math.sqrt(squaredError);
  const t = difference / standardError;
  const halfWidth = criticalT(confidence, df) * standardError;
  const p = Math.min(1, 2 * studentTCdf(-Math.abs(t), df));
  return { difference, low: difference - halfWidth, high: difference + halfWidth, t, df, p };
}

/** mulberry32's Weyl-sequence increment. */
const MULBERRY_INCREMENT = 0x6d2b79f5;
/** 2³², to map a 32-bit integer to [0, 1). */
const TWO_POW_32 = 4294967296;

/** Seeded PRNG (mulberry32) returning floats in [0, 1): the same seed gives the same bootstrap, so reports reproduce. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + MULBERRY_INCREMENT) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / TWO_POW_32;
  };
}

export interface BootstrapOptions {
  confidence?: number;
  resamples?: number;
  seed?: number;
}

export interface BootstrapInterval {
  n: number;
  mean: number | null;
  /** null when n < 2: resampling one value only ever gives that value back. */
  low: number | null;
  high: number | null;
}

/** Default number of bootstrap resamples: Monte Carlo error on a 95% percentile bound well under its sampling error. */
const DEFAULT_RESAMPLES = 10_000;
/** Default PRNG seed, so a result without explicit options still reproduces. */
const DEFAULT_SEED = 1;

/** Mean of a resample drawn with replacement from xs. */
function resampledMean(xs: readonly number[], random: () => number): number {
  let sum = 0;
  for (let i = 0; i < xs.length; i++) sum += xs[Math.floor(random() * xs.length)];
  return sum / xs.length;
}

/** Quantile of sorted values by linear interpolation between order statistics (R's type 7). */
function sortedQuantile(sorted: readonly number[], q: number): number {
  const position = q * (sorted.length - 1);
  const below = Math.floor(position);
  const above = Math.min(below + 1, sorted.length - 1);
  return sorted[below] + (position - below) * (sorted[above] - sorted[below]);
}

/** Percentile interval of bootstrap statistics at a two-sided confidence level. */
function percentileInterval(statistics: number[], confidence: number): { low: number; high: number } {
  statistics.sort((x, y) => x - y);
  const alpha = 1 - confidence;
  return { low: sortedQuantile(statistics, alpha / 2), high: sortedQuantile(statistics, 1 - alpha / 2) };
}

/** Percentile bootstrap CI of the mean: no normality assumption, deterministic through its seed. */
export function bootstrapInterval(xs: readonly number[], options: BootstrapOptions = {}): BootstrapInterval {
  const { confidence = 0.95, resamples = DEFAULT_RESAMPLES, seed = DEFAULT_SEED } = options;
  assertConfidence(confidence);
  const n = xs.length;
  if (n === 0) return { n, mean: null, low: null, high: null };
  if (n < 2) return { n, mean: xs[0], low: null, high: null };
  const random = seededRandom(seed);
  const means = Array.from({ length: resamples }, () => resampledMean(xs, random));
  return { n, mean: mean(xs), ...percentileInterval(means, confidence) };
}

export interface BootstrapDifferenceInterval {
  /** mean(b) − mean(a); null when either sample is empty. */
  difference: number | null;
  /** null when either sample has fewer than 2 values. */
  low: number | null;
  high: number | null;
}

/** Percentile bootstrap CI of mean(b) − mean(a), resampling each arm on its own (the arms are independent runs). */
export function bootstrapDifferenceInterval(a: readonly number[], b: readonly number[], options: BootstrapOptions = {}): BootstrapDifferenceInterval {
  const { confidence = 0.95, resamples = DEFAULT_RESAMPLES, seed = DEFAULT_SEED } = options;
  assertConfidence(confidence);
  const difference = a.length > 0 && b.length > 0 ? mean(b) - mean(a) : null;
  if (difference === null || a.length < 2 || b.length < 2) return { difference, low: null, high: null };
  const random = seededRandom(seed);
  const differences = Array.from({ length: resamples }, () => resampledMean(b, random) - resampledMean(a, random));
  return { difference, ...percentileInterval(differences, confidence) };
}

export interface PermutationOptions {
  permutations?: number;
  seed?: number;
}

export interface PermutationResult {
  /** mean(b) − mean(a); null when either sample is empty. */
  difference: number | null;
  /** Two-sided p-value; null when either sample is empty. */
  p: number | null;
}

/** Default number of random relabellings, and the most splits enumerated exactly. */
const DEFAULT_PERMUTATIONS = 10_000;
/** Relative slack when comparing a relabelled difference to the observed one, so float noise does not drop ties. */
const TIE_TOLERANCE = 1e-9;

/** C(n, k), or Infinity once it passes `cap` (only "is it ≤ cap" matters, and the exact value overflows fast). */
function binomialUpTo(n: number, k: number, cap: number): number {
  let value = 1;
  for (let i = 1; i <= Math.min(k, n - k); i++) {
    value = (value * (n - Math.min(k, n - k) + i)) / i;
    if (value > cap) return Infinity;
  }
  return Math.round(value);
}

/**
 * Two-sided permutation test on the difference of means: under "the arm label does not matter", how often does a
 * relabelling give a difference at least as large? Exact when all splits fit in the budget, else Monte Carlo.
 */
export function permutationTest(a: readonly number[], b: readonly number[], options: PermutationOptions = {}): PermutationResult {
  const { permutations = DEFAULT_PERMUTATIONS, seed = DEFAULT_SEED } = options;
  if (a.length === 0 || b.length === 0) return { difference: null, p: null };
  const pooled = [...a, ...b];
  const total = pooled.reduce((sum, x) => sum + x, 0);
  const difference = mean(b) - mean(a);
  const observed = Math.abs(difference);
  const tolerance = TIE_TOLERANCE * Math.max(1, observed, ...pooled.map(Math.abs));
  // A split is summarized by the sum of its "a" group: the rest of the pooled sum is b's.
  const isAsExtreme = (sumA: number) => Math.abs((total - sumA) / b.length - sumA / a.length) >= observed - tolerance;
  const splits = binomialUpTo(pooled.length, a.length, permutations);
  if (splits <= permutations) return { difference, p: exactPermutationCount(pooled, a.length, isAsExtreme) / splits };
  const random = seededRandom(seed);
  let count = 0;
  for (let i = 0; i < permutations; i++) if (isAsExtreme(randomSubsetSum(pooled, a.length, random))) count++;
  // (count + 1) / (permutations + 1): the observed labelling is one of the relabellings, so p is never 0.
  return { difference, p: (count + 1) / (permutations + 1) };
}

/** Number of size-k subsets of values whose sum passes the test, by recursive enumeration. */
function exactPermutationCount(values: readonly number[], k: number, passes: (subsetSum: number) => boolean): number {
  const visit = (start: number, remaining: number, sum: number): number => {
    if (remaining === 0) return passes(sum) ? 1 : 0;
    let count = 0;
    for (let i = start; i <= values.length - remaining; i++) count += visit(i + 1, remaining - 1, sum + values[i]);
    return count;
  };
  return visit(0, k, 0);
}

/** Sum of a uniformly random size-k subset (partial Fisher–Yates on a copy). */
function randomSubsetSum(values: readonly number[], k: number, random: () => number): number {
  const shuffled = [...values];
  let sum = 0;
  for (let i = 0; i < k; i++) {
    const j = i + Math.floor(random() * (shuffled.length - i));
    [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
    sum += shuffled[i];
  }
  return sum;
}

/** Hedges' small-sample correction J ≈ 1 − 3 / (4·df − 1) with df = n_a + n_b − 2 (Hedges 1981). */
const HEDGES_CORRECTION_NUMERATOR = 3;

/**
 * Hedges' g of b vs a: the difference of means in pooled-sd units, shrunk for small samples (Cohen's d overstates
 * effects at a few seeds). null when either arm has fewer than 2 runs or there is no spread.
 */
export function hedgesG(a: readonly number[], b: readonly number[]): number | null {
  if (a.length < 2 || b.length < 2) return null;
  const df = a.length + b.length - 2;
  const pooledVariance = ((a.length - 1) * sampleVariance(a) + (b.length - 1) * sampleVariance(b)) / df;
  if (!(pooledVariance > 0)) return null;
  const d = (mean(b) - mean(a)) / Math.sqrt(pooledVariance);
  return d * (1 - HEDGES_CORRECTION_NUMERATOR / (4 * df - 1));
}

// ---------------------------------------------------------------------------------------------------------------
// Curves
// ---------------------------------------------------------------------------------------------------------------

export interface CurvePoint {
  step: number;
  value: number;
}

export interface BandPoint {
  step: number;
  /** Seeds that logged this step. */
  n: number;
  mean: number;
  /** null when n < 2. */
  low: number | null;
  high: number | null;
}

/**
 * Mean and t band across seeds at each step, for plotting an arm's learning curve. Curves may be ragged (a seed that
 * crashed or logs other steps): each step uses the seeds that have it. Within one curve a repeated step keeps its last
 * value, so no seed counts twice.
 */
export function curveBand(curves: readonly (readonly CurvePoint[])[], confidence = 0.95): BandPoint[] {
  assertConfidence(confidence);
  const valuesByStep = new Map<number, number[]>();
  for (const curve of curves) {
    const lastByStep = new Map<number, number>();
    for (const point of curve) lastByStep.set(point.step, point.value);
    for (const [step, value] of lastByStep) {
      const values = valuesByStep.get(step);
      if (values) values.push(value);
      else valuesByStep.set(step, [value]);
    }
  }
  return [...valuesByStep.entries()]
    .sort(([x], [y]) => x - y)
    .map(([step, values]) => {
      const interval = tInterval(values, confidence);
      return { step, n: interval.n, mean: interval.mean ?? NaN, low: interval.low, high: interval.high };
    });
}

/**
 * Trapezoid area under a curve divided by its step span: the curve's mean level, on the value's own scale, so runs
 * of different lengths compare. A single point is its value; no points, null. Points are sorted by step first.
 */
export function areaUnderCurve(points: readonly CurvePoint[]): number | null {
  if (points.length === 0) return null;
  if (points.length === 1) return points[0].value;
  const sorted = [...points].sort((x, y) => x.step - y.step);
  const span = sorted[sorted.length - 1].step - sorted[0].step;
  if (span === 0) return mean(sorted.map((point) => point.value));
  let area = 0;
  for (let i = 1; i < sorted.length; i++) area += ((sorted[i].value + sorted[i - 1].value) / 2) * (sorted[i].step - sorted[i - 1].step);
  return area / span;
}
