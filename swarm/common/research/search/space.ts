/**
 * The search space and the stage's arms, shared by every strategy: a small seeded PRNG, sampling and enumerating a
 * space, readable unique arm names, and reading what the stage's runs say of an arm (finished? mean metric?).
 * Pure code: no Node built-ins, deterministic given a seed.
 */
import type { ArmResult, BestArm, ParamValue, Params, RangeDimension, SearchSpace, SpaceDimension, TrialOutcome } from './types.ts';

// ---------------------------------------------------------------------------------------------------------------
// Seeded randomness

/** The research system's one seeded generator (mulberry32), shared with the statistics. */
export { seededRandom } from '../stats.ts';

/** Multipliers of a murmur3-style finaliser: they spread every input bit over the output. */
const MIX_MULTIPLIER_A = 0x85ebca6b;
const MIX_MULTIPLIER_B = 0xc2b2ae35;
/** Odd constant that separates streams, so stream 0 of seed s differs from seed s itself. */
const STREAM_SALT = 0x9e3779b9;

/** A seed for the `stream`-th independent draw of a strategy seeded with `seed` (e.g. its i-th proposed arm). */
export function mixSeed(seed: number, stream: number): number {
  let h = (seed ^ Math.imul(stream + 1, STREAM_SALT)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), MIX_MULTIPLIER_A);
  h = Math.imul(h ^ (h >>> 13), MIX_MULTIPLIER_B);
  return (h ^ (h >>> 16)) >>> 0;
}

// ---------------------------------------------------------------------------------------------------------------
// The space

export function isRange(dim: SpaceDimension): dim is RangeDimension {
  return 'min' in dim;
}

/** Throws on a space no strategy can search: empty lists, inverted or non-finite ranges, log ranges through zero. */
export function validateSpace(space: SearchSpace): void {
  const knobs = Object.keys(space);
  if (knobs.length === 0) throw new Error('search space: at least one knob is needed');
  for (const knob of knobs) {
    const dim = space[knob];
    if (!isRange(dim)) {
      if (!Array.isArray(dim.values) || dim.values.length === 0) throw new Error(`search space: "${knob}" lists no values`);
      continue;
    }
    if (!Number.isFinite(dim.min) || !Number.isFinite(dim.max) || dim.min > dim.max) {
      throw new Error(`search space: "${knob}" needs finite min <= max (got ${dim.min}..${dim.max})`);
    }
    if (dim.log && dim.min <= 0) throw new Error(`search space: "${knob}" is log-scaled, so its min must be > 0`);
    if (dim.integer && Math.ceil(dim.min) > Math.floor(dim.max)) throw new Error(`search space: "${knob}" holds no integer`);
  }
}

/** Knob names in a fixed order, so sampling draws dimensions in the same order whatever the spec's key order. */
export function knobsOf(space: SearchSpace): string[] {
  return Object.keys(space).sort();
}

/** A range's value from a position u in [0, 1]: linear or geometric interpolation. */
function interpolate(dim: RangeDimension, u: number): number {
  if (dim.log) return Math.exp(Math.log(dim.min) + u * (Math.log(dim.max) - Math.log(dim.min)));
  return dim.min + u * (dim.max - dim.min);
}

/** Clamps to the range and, for integer knobs, rounds to the nearest whole number inside it. */
export function snapToRange(dim: RangeDimension, value: number): number {
  if (!dim.integer) return Math.min(dim.max, Math.max(dim.min, value));
  return Math.min(Math.floor(dim.max), Math.max(Math.ceil(dim.min), Math.round(value)));
}

/** One value of a dimension: a uniform pick of a list, or uniform (log-uniform) in a range. */
export function sampleValue(dim: SpaceDimension, rand: () => number): ParamValue {
  if (!isRange(dim)) return dim.values[Math.min(dim.values.length - 1, Math.floor(rand() * dim.values.length))];
  if (dim.integer && !dim.log) {
    // Uniform over the whole numbers (rounding a continuous draw would give the two ends half weight).
    const low = Math.ceil(dim.min);
    const count = Math.floor(dim.max) - low + 1;
    return low + Math.min(count - 1, Math.floor(rand() * count));
  }
  return snapToRange(dim, interpolate(dim, rand()));
}

/** One arm's params drawn from the space. */
export function sampleParams(space: SearchSpace, rand: () => number): Params {
  const params: Params = {};
  for (const knob of knobsOf(space)) params[knob] = sampleValue(space[knob], rand);
  return params;
}

/** Draws per wanted arm before giving up on finding another distinct one (a small categorical space runs out). */
const DRAWS_PER_DISTINCT_ARM = 20;

/** `count` distinct param sets from the space, or fewer when the space holds fewer distinct points than that. */
export function sampleDistinctParams(space: SearchSpace, count: number, rand: () => number): Params[] {
  const seen = new Set<string>();
  const arms: Params[] = [];
  for (let draw = 0; arms.length < count && draw < count * DRAWS_PER_DISTINCT_ARM; draw++) {
    const params = sampleParams(space, rand);
    const key = paramsKey(params);
    if (seen.has(key)) continue;
    seen.add(key);
    arms.push(params);
  }
  return arms;
}

/** Significant digits grid points keep, to drop float noise of log spacing (1e-5 · 10^k → 9.999999999999999e-5). */
const GRID_PRECISION = 12;

/** A dimension's grid: its list, or `points` evenly (log-)spaced values over the range, rounded and deduplicated. */
export function gridValues(dim: SpaceDimension, points: number): ParamValue[] {
  if (!isRange(dim)) return [...dim.values];
  if (dim.min === dim.max) return [snapToRange(dim, dim.min)];
  const values: number[] = [];
  for (let i = 0; i < points; i++) {
    const u = points === 1 ? 0.5 : i / (points - 1);
    const value = snapToRange(dim, Number(interpolate(dim, u).toPrecision(GRID_PRECISION)));
    if (!values.includes(value)) values.push(value);
  }
  return values;
}

/** The cartesian product of every dimension's grid, in a fixed order (knobs sorted, first knob slowest). */
export function enumerateSpace(space: SearchSpace, pointsPerRange: number): Params[] {
  let product: Params[] = [{}];
  for (const knob of knobsOf(space)) {
    const values = gridValues(space[knob], pointsPerRange);
    product = product.flatMap((partial) => values.map((value) => ({ ...partial, [knob]: value })));
  }
  return product;
}

/** The number of points of a space made only of lists, or null when it has a range (then it is not enumerable). */
export function listedSpaceSize(space: SearchSpace): number | null {
  let size = 1;
  for (const dim of Object.values(space)) {
    if (isRange(dim)) return null;
    size *= dim.values.length;
  }
  return size;
}

/** An order-independent identity of a param set, for spotting duplicates. */
export function paramsKey(params: Params): string {
  return JSON.stringify(Object.keys(params).sort().map((key) => [key, params[key]]));
}

// ---------------------------------------------------------------------------------------------------------------
// Arm names

/** Significant digits of a number in a short arm name. */
const SHORT_DIGITS = 3;
/** Enough significant digits to tell any two doubles apart. */
const MAX_DIGITS = 17;
/** Numbers at or above this magnitude (or below the next) are written in exponent form: 1e6, 5e-4. */
const EXPONENT_ABOVE = 1e4;
const EXPONENT_BELOW = 1e-2;
/** Whole numbers below this are written in full (groupSize=4096), whatever the digit budget. */
const WHOLE_NUMBER_LIMIT = 1e6;

/** A value as an arm name shows it: numbers with up to `digits` significant digits, exponent form when tiny or huge. */
export function formatParamValue(value: ParamValue, digits = SHORT_DIGITS): string {
  if (typeof value !== 'number') return String(value);
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return '0';
  if (Number.isInteger(value) && Math.abs(value) < WHOLE_NUMBER_LIMIT) return String(value);
  const rounded = Number(value.toPrecision(digits));
  const magnitude = Math.abs(rounded);
  if (magnitude >= EXPONENT_BELOW && magnitude < EXPONENT_ABOVE) return String(rounded);
  return rounded.toExponential().replace('e+', 'e');
}

/** The last segment of a knob path: "train.learningRate" → "learningRate". */
export function knobLabel(path: string): string {
  const dot = path.lastIndexOf('.');
  return dot < 0 ? path : path.slice(dot + 1);
}

/**
 * A readable name of a param set: `label=value` pairs sorted by label and joined by commas, each label the knob's last
 * path segment (its full path where two knobs of the set share a last segment).
 */
export function armName(params: Params, digits = SHORT_DIGITS): string {
  const paths = Object.keys(params);
  const labelCounts = new Map<string, number>();
  for (const path of paths) labelCounts.set(knobLabel(path), (labelCounts.get(knobLabel(path)) ?? 0) + 1);
  const pairs = paths.map((path) => {
    const label = labelCounts.get(knobLabel(path)) === 1 ? knobLabel(path) : path;
    return [label, formatParamValue(params[path], digits)] as const;
  });
  pairs.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return pairs.map(([label, value]) => `${label}=${value}`).join(',');
}

/**
 * A name for `params` not in `taken`: the short form, else the same with more digits until it differs, else (only for
 * a param set identical to a named one) the name with a `#2`, `#3`… suffix.
 */
export function uniqueArmName(params: Params, taken: ReadonlySet<string>): string {
  for (let digits = SHORT_DIGITS; digits <= MAX_DIGITS; digits++) {
    const name = armName(params, digits);
    if (!taken.has(name)) return name;
  }
  const base = armName(params, MAX_DIGITS);
  let copy = 2;
  while (taken.has(`${base}#${copy}`)) copy++;
  return `${base}#${copy}`;
}

/** An arm to run: its unique name and params. */
export interface NamedArm { arm: string; params: Params }

/** Names every param set of a list, each unique among the list (and among `taken`), in list order. */
export function nameArms(list: readonly Params[], taken: Iterable<string> = []): NamedArm[] {
  const names = new Set(taken);
  return list.map((params) => {
    const arm = uniqueArmName(params, names);
    names.add(arm);
    return { arm, params };
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Reading the stage's runs

/** The key of an arm at a step budget. */
export function runKey(arm: string, steps: number): string {
  return `${steps}\u0000${arm}`;
}

/** The stage's runs grouped by (arm, steps). */
export type RunIndex = ReadonlyMap<string, readonly TrialOutcome[]>;

export function indexRuns(trials: readonly TrialOutcome[]): RunIndex {
  const index = new Map<string, TrialOutcome[]>();
  for (const trial of trials) {
    const key = runKey(trial.arm, trial.steps);
    const runs = index.get(key);
    if (runs) runs.push(trial);
    else index.set(key, [trial]);
  }
  return index;
}

function isTerminal(trial: TrialOutcome): boolean {
  return trial.state === 'done' || trial.state === 'failed' || trial.state === 'stopped';
}

/**
 * An arm's result at a step budget: finished once `seeds` distinct seeds have ended and none is still pending or
 * running; its metric is the mean over the done runs' metrics, -Infinity when every run failed or was stopped.
 */
export function armResult(runs: readonly TrialOutcome[] | undefined, arm: NamedArm, steps: number, seeds: number): ArmResult {
  const list = runs ?? [];
  const endedSeeds = new Set(list.filter(isTerminal).map((run) => run.seed));
  const finished = list.length > 0 && list.every(isTerminal) && endedSeeds.size >= seeds;
  if (!finished) return { arm: arm.arm, params: arm.params, steps, finished, metric: null };
  const metrics = list.filter((run) => run.state === 'done' && run.metric !== null && Number.isFinite(run.metric)).map((run) => run.metric as number);
  const metric = metrics.length === 0 ? -Infinity : metrics.reduce((sum, m) => sum + m, 0) / metrics.length;
  return { arm: arm.arm, params: arm.params, steps, finished, metric };
}

/** Whether (arm, steps) was ever proposed: any run of it is on record. */
export function wasProposed(index: RunIndex, arm: string, steps: number): boolean {
  return (index.get(runKey(arm, steps))?.length ?? 0) > 0;
}

/** Whether (arm, steps) was proposed and is not finished yet. */
export function isInFlight(index: RunIndex, arm: NamedArm, steps: number, seeds: number): boolean {
  return wasProposed(index, arm.arm, steps) && !armResult(index.get(runKey(arm.arm, steps)), arm, steps, seeds).finished;
}

/** Finished results ranked best first (ties keep the given order, which is the arms' proposal order). */
export function rankResults(results: readonly ArmResult[]): ArmResult[] {
  return results.filter((result) => result.finished).sort((a, b) => (b.metric ?? -Infinity) - (a.metric ?? -Infinity) || 0);
}

/** The best finished result with a real (finite) metric, or null. */
export function bestResult(results: readonly ArmResult[]): BestArm | null {
  const top = rankResults(results).find((result) => result.metric !== null && Number.isFinite(result.metric));
  return top ? { arm: top.arm, params: top.params, metric: top.metric as number } : null;
}
