/**
 * What the gateway adds to each call besides generation (auth, validation, prompt rendering, tracking, storing,
 * serializing): the benchmark reads it. A bounded ring of recent samples, so it costs nothing to keep on.
 */
const CAPACITY = 100_000;

export class OverheadMeter {
  private readonly samples = new Float64Array(CAPACITY);
  private count = 0;

  add(ms: number): void {
    this.samples[this.count % CAPACITY] = ms;
    this.count += 1;
  }

  reset(): void {
    this.count = 0;
  }

  /** Recent samples in ms, unsorted. */
  values(): number[] {
    return Array.from(this.samples.subarray(0, Math.min(this.count, CAPACITY)));
  }
}
