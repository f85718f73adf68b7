/**
 * Exponential moving average as Weights & Biases (and TensorBoard) draw it: each point is
 * `last = last·w + (1−w)·y`, divided by `1 − w^n` (debiasing) so the first points are not pulled towards 0.
 * Missing values (null, NaN, ±Infinity) stay missing and do not advance the average: a gap is not a zero.
 */

/** The largest weight that still moves: at 1 the average would never leave its first value. */
export const MAX_SMOOTHING = 0.99;

/** `weight` in [0, MAX_SMOOTHING]; 0 gives the values back unchanged (as a new array). */
export function emaSmooth(values: readonly (number | null)[], weight: number): (number | null)[] {
  const w = clampSmoothing(weight);
  const out: (number | null)[] = new Array(values.length);
  let last = 0;
  let debias = 1; // w^n, n = finite values seen so far
  for (let i = 0; i < values.length; i++) {
    const y = values[i];
    if (y === null || !Number.isFinite(y)) {
      out[i] = null;
      continue;
    }
    if (w === 0) {
      out[i] = y;
      continue;
    }
    last = last * w + (1 - w) * y;
    debias *= w;
    out[i] = last / (1 - debias);
  }
  return out;
}

/** A smoothing weight made safe: NaN → 0, below 0 → 0, above MAX_SMOOTHING → MAX_SMOOTHING. */
export function clampSmoothing(weight: number): number {
  if (!Number.isFinite(weight) || weight <= 0) return 0;
  return Math.min(weight, MAX_SMOOTHING);
}
