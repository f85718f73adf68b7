/**
 * Tree-structured Parzen Estimator (Bergstra et al. 2011), univariate: the first `startupTrials` arms are drawn at
 * random; after that each free slot gets the arm that maximises l(x)/g(x), where l models the finished arms in the
 * top `gamma` fraction by metric and g the rest. Numeric knobs use a mixture of truncated Gaussians in (log-)space
 * plus a broad prior component; lists use Laplace-smoothed frequencies. Every arm runs at the stage's full budget.
 *
 * Bandwidth rule (one per model and knob): Scott's rule, σ = 1.06 · sd · n^(-1/5) over the model's n points in the
 * knob's (log-)space, clamped to [range / min(100, n + 1), range] — the lower clamp is hyperopt's, so a lone point
 * or a tight cluster still explores, and no kernel is wider than the range. The prior is one more kernel at the
 * range's centre with σ = range and the weight of one point.
 *
 * Deterministic: the i-th arm of the stage is drawn from its own stream, seededRandom(mixSeed(seed, i)), and from
 * the arms finished so far, so next() is a pure function of the runs it is shown.
 */
import type { ArmProposal, ArmResult, ParamValue, Params, RangeDimension, SearchSpace, SearchStrategy, StrategyContext, TrialOutcome, ValuesDimension } from './types.ts';
import {
  armResult,
  bestResult,
  indexRuns,
  isRange,
  knobsOf,
  mixSeed,
  paramsKey,
  rankResults,
  runKey,
  sampleParams,
  seededRandom,
  snapToRange,
  uniqueArmName,
  type NamedArm,
} from './space.ts';

export interface TpeOptions { space: SearchSpace; trials: number; startupTrials: number; gamma: number; candidates: number }

/** Finished arms needed before a model is fitted: one good and one bad (fewer falls back to a random draw). */
const MIN_OBSERVATIONS_FOR_MODEL = 2;
/** Scott's rule-of-thumb factor for a Gaussian kernel density estimate. */
const SCOTT_FACTOR = 1.06;
/** Scott's rule exponent: bandwidth shrinks as n^(-1/5). */
const SCOTT_EXPONENT = -1 / 5;
/** The narrowest kernel is range / min(this, n + 1) (hyperopt's clamp): never narrower than 1% of the range. */
const MAX_BANDWIDTH_DIVISOR = 100;
/** The prior kernel's weight, in points: enough to keep both densities positive everywhere, small against data. */
const PRIOR_WEIGHT = 1;
/** Pseudo-count added to every listed value's frequency (Laplace smoothing), so no value's probability is zero. */
const PRIOR_COUNT = 1;
/** Draws of a truncated Gaussian before giving up and clamping one (the kernel's mass inside is >= 34%, so rare). */
const MAX_REJECTIONS = 64;
/** Random draws tried for a startup arm whose params are not already on record. */
const DISTINCT_DRAW_ATTEMPTS = 20;

// ---------------------------------------------------------------------------------------------------------------
// Gaussian helpers

/** Abramowitz & Stegun 7.1.26: erf(x) to 1.5e-7, plenty for ranking candidates. */
const ERF_P = 0.3275911;
const ERF_COEFFICIENTS = [0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429];

function erf(x: number): number {
  const sign = x < 0 ? -1 : 1;
  const t = 1 / (1 + ERF_P * Math.abs(x));
  const poly = ERF_COEFFICIENTS.reduceRight((acc, c) => acc * t + c, 0) * t;
  return sign * (1 - poly * Math.exp(-x * x));
}

function normalCdf(z: number): number {
  return 0.5 * (1 + erf(z / Math.SQRT2));
}

function normalPdf(z: number): number {
  return Math.exp(-0.5 * z * z) / Math.sqrt(2 * Math.PI);
}

/** A standard normal draw (Box–Muller; 1 - u keeps the log's argument in (0, 1]). */
function standardNormal(rand: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

// ---------------------------------------------------------------------------------------------------------------
// Models of one knob

interface KnobModel {
  /** A draw in the knob's internal space (log-space for log knobs; a list index for lists). */
  sample(rand: () => number): number;
  /** Log density (or log probability) at an internal value. */
  logDensity(x: number): number;
}

interface Kernel { mu: number; sigma: number; weight: number }

/** A mixture of Gaussians truncated to [lo, hi]. */
function parzenModel(points: readonly number[], lo: number, hi: number): KnobModel {
  const range = hi - lo;
  const sigma = bandwidth(points, range);
  const kernels: Kernel[] = [...points.map((mu) => ({ mu, sigma, weight: 1 })), { mu: (lo + hi) / 2, sigma: range, weight: PRIOR_WEIGHT }];
  const totalWeight = kernels.reduce((sum, k) => sum + k.weight, 0);
  const massInside = (k: Kernel) => normalCdf((hi - k.mu) / k.sigma) - normalCdf((lo - k.mu) / k.sigma);
  const masses = kernels.map(massInside);
  return {
    sample(rand) {
      let pick = rand() * totalWeight;
      const kernel = kernels.find((k) => (pick -= k.weight) < 0) ?? kernels[kernels.length - 1];
      for (let attempt = 0; attempt < MAX_REJECTIONS; attempt++) {
        const x = kernel.mu + kernel.sigma * standardNormal(rand);
        if (x >= lo && x <= hi) return x;
      }
      return Math.min(hi, Math.max(lo, kernel.mu));
    },
    logDensity(x) {
      const density = kernels.reduce((sum, k, i) => sum + (k.weight * normalPdf((x - k.mu) / k.sigma)) / (k.sigma * masses[i]), 0);
      return Math.log(density / totalWeight);
    },
  };
}

/** The documented bandwidth rule (see the header): Scott's rule clamped to [range / min(100, n + 1), range]. */
export function bandwidth(points: readonly number[], range: number): number {
  const n = points.length;
  const narrowest = range / Math.min(MAX_BANDWIDTH_DIVISOR, n + 1);
  if (n < 2) return narrowest; // no spread to measure: a lone point gets half the range, none the whole range
  const mean = points.reduce((sum, x) => sum + x, 0) / n;
  const sd = Math.sqrt(points.reduce((sum, x) => sum + (x - mean) ** 2, 0) / n);
  return Math.min(range, Math.max(narrowest, SCOTT_FACTOR * sd * n ** SCOTT_EXPONENT));
}

/** Laplace-smoothed frequencies of a list knob's values (by index). */
function categoricalModel(indices: readonly number[], size: number): KnobModel {
  const counts = Array.from({ length: size }, () => PRIOR_COUNT);
  for (const i of indices) counts[i]++;
  const total = counts.reduce((sum, c) => sum + c, 0);
  return {
    sample(rand) {
      let pick = rand() * total;
      const index = counts.findIndex((c) => (pick -= c) < 0);
      return index < 0 ? size - 1 : index;
    },
    logDensity: (x) => Math.log(counts[x] / total),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Knob codecs: between a param value and the models' internal space

interface KnobCodec {
  /** The internal value of a recorded param, or null when it does not belong to this knob's space. */
  encode(value: ParamValue | undefined): number | null;
  /** An internal value back to a param value, snapped (integers rounded), with the internal value of that snap. */
  decode(x: number): { value: ParamValue; x: number };
  fit(points: readonly number[]): KnobModel;
  /** True when the knob can take a single value only: it cannot tell good from bad. */
  constant: boolean;
}

function rangeCodec(dim: RangeDimension): KnobCodec {
  const toInternal = (v: number) => (dim.log ? Math.log(v) : v);
  const lo = toInternal(dim.integer ? Math.ceil(dim.min) : dim.min);
  const hi = toInternal(dim.integer ? Math.floor(dim.max) : dim.max);
  return {
    encode: (value) => (typeof value === 'number' && value >= dim.min && value <= dim.max ? toInternal(value) : null),
    decode(x) {
      const value = snapToRange(dim, dim.log ? Math.exp(x) : x);
      return { value, x: toInternal(value) };
    },
    fit: (points) => parzenModel(points, lo, hi),
    constant: lo === hi,
  };
}

function listCodec(dim: ValuesDimension): KnobCodec {
  return {
    encode(value) {
      const index = dim.values.indexOf(value as ParamValue);
      return index < 0 ? null : index;
    },
    decode: (x) => ({ value: dim.values[x], x }),
    fit: (points) => categoricalModel(points, dim.values.length),
    constant: dim.values.length === 1,
  };
}

function codecFor(dim: RangeDimension | ValuesDimension): KnobCodec {
  return isRange(dim) ? rangeCodec(dim) : listCodec(dim);
}

// ---------------------------------------------------------------------------------------------------------------
// Suggesting an arm

/** Splits finished arms (best first) into the top max(1, ⌈gamma·n⌉) — leaving at least one bad — and the rest. */
export function splitGoodBad<T>(ranked: readonly T[], gamma: number): { good: T[]; bad: T[] } {
  const goodCount = Math.min(ranked.length - 1, Math.max(1, Math.ceil(gamma * ranked.length)));
  return { good: ranked.slice(0, goodCount), bad: ranked.slice(goodCount) };
}

interface FittedKnob { knob: string; codec: KnobCodec; good: KnobModel; bad: KnobModel }

function fitKnobs(space: SearchSpace, good: readonly ArmResult[], bad: readonly ArmResult[]): FittedKnob[] {
  const internal = (codec: KnobCodec, knob: string, results: readonly ArmResult[]) =>
    results.map((r) => codec.encode(r.params[knob])).filter((x): x is number => x !== null);
  return knobsOf(space).map((knob) => {
    const codec = codecFor(space[knob]);
    return { knob, codec, good: codec.fit(internal(codec, knob, good)), bad: codec.fit(internal(codec, knob, bad)) };
  });
}

/** One candidate drawn from the good model, with its score log l(x) − log g(x). */
function drawCandidate(knobs: readonly FittedKnob[], rand: () => number): { params: Params; score: number } {
  const params: Params = {};
  let score = 0;
  for (const { knob, codec, good, bad } of knobs) {
    const { value, x } = codec.decode(good.sample(rand));
    params[knob] = value;
    if (!codec.constant) score += good.logDensity(x) - bad.logDensity(x);
  }
  return { params, score };
}

/** TPE's pick: the best-scoring of `candidates` draws whose params are new (else the best-scoring one). */
export function suggestParams(
  space: SearchSpace,
  finished: readonly ArmResult[],
  gamma: number,
  candidates: number,
  rand: () => number,
  takenKeys: ReadonlySet<string> = new Set(),
): Params {
  const { good, bad } = splitGoodBad(rankResults(finished), gamma);
  const knobs = fitKnobs(space, good, bad);
  const drawn = Array.from({ length: candidates }, () => drawCandidate(knobs, rand));
  const ranked = [...drawn].sort((a, b) => b.score - a.score);
  return (ranked.find((c) => !takenKeys.has(paramsKey(c.params))) ?? ranked[0]).params;
}

/** A startup draw, preferring params not already on record. */
function randomParams(space: SearchSpace, rand: () => number, takenKeys: ReadonlySet<string>): Params {
  let params = sampleParams(space, rand);
  for (let attempt = 1; attempt < DISTINCT_DRAW_ATTEMPTS && takenKeys.has(paramsKey(params)); attempt++) params = sampleParams(space, rand);
  return params;
}

/** The arms on record at `steps`, in order of first appearance. */
function armsOnRecord(trials: readonly TrialOutcome[], steps: number): NamedArm[] {
  const arms = new Map<string, NamedArm>();
  for (const t of trials) if (t.steps === steps && !arms.has(t.arm)) arms.set(t.arm, { arm: t.arm, params: t.params });
  return [...arms.values()];
}

function canFitModel(finished: readonly ArmResult[]): boolean {
  return finished.length >= MIN_OBSERVATIONS_FOR_MODEL && finished.some((r) => r.metric !== null && Number.isFinite(r.metric));
}

export function createTpeStrategy(options: TpeOptions, ctx: StrategyContext): SearchStrategy {
  if (!(options.gamma > 0 && options.gamma < 1)) throw new Error(`tpe: gamma must be in (0, 1) (got ${options.gamma})`);
  if (!(options.candidates >= 1)) throw new Error(`tpe: candidates must be >= 1 (got ${options.candidates})`);
  const results = (trials: readonly TrialOutcome[]) => {
    const index = indexRuns(trials);
    return armsOnRecord(trials, ctx.steps).map((arm) => armResult(index.get(runKey(arm.arm, ctx.steps)), arm, ctx.steps, ctx.seeds));
  };
  return {
    name: 'tpe',
    next(trials) {
      const known = results(trials);
      const finished = known.filter((r) => r.finished);
      const slots = Math.min(ctx.parallelArms - (known.length - finished.length), options.trials - known.length);
      const names = new Set(known.map((r) => r.arm));
      const keys = new Set(known.map((r) => paramsKey(r.params)));
      const proposals: ArmProposal[] = [];
      for (let j = 0; j < slots; j++) {
        const rand = seededRandom(mixSeed(ctx.seed, known.length + j));
        const useModel = known.length + j >= options.startupTrials && canFitModel(finished);
        const params = useModel ? suggestParams(options.space, finished, options.gamma, options.candidates, rand, keys) : randomParams(options.space, rand, keys);
        const arm = uniqueArmName(params, names);
        names.add(arm);
        keys.add(paramsKey(params));
        proposals.push({ arm, params, steps: ctx.steps });
      }
      const done = proposals.length === 0 && known.length >= options.trials && finished.length === known.length;
      return { arms: proposals, done };
    },
    best: (trials) => bestResult(results(trials)),
  };
}
