/**
 * Decode attention on the host (wasm/cpu backends): the engine's SIMD kernel over a KV cache in wasm memory
 * (worker/kv-cache.ts) against the same attention written plainly in JavaScript over Float32Array rows, for a
 * Qwen3-0.6B-shaped layer (16 query heads over 8 key/value heads of 128) at growing context lengths.
 *
 * Per call: one new query row attends over `len` cached positions of one layer. `per_token_ms_28_layers` is what a
 * 28-layer model spends on attention per generated token and sequence. Reads: keys and values once per call.
 */
import { HostKvCache, type KvDims } from '../worker/kv-cache.ts';
import { seededRandom } from '../worker/common/random.ts';
import { type BenchContext, formatTable, type Row } from './report.ts';

const DIMS: KvDims = { layers: 1, heads: 16, kvHeads: 8, headDim: 128 };
const LENGTHS = [128, 1024, 4096, 16384];

/** The plain-JavaScript baseline: scores, softmax, weighted values, per head, scalar. */
function plainAttention(q: Float32Array, k: Float32Array, v: Float32Array, len: number, out: Float32Array): void {
  const { heads, kvHeads, headDim } = DIMS;
  const rep = heads / kvHeads;
  const row = kvHeads * headDim;
  const scale = 1 / Math.sqrt(headDim);
  const scores = new Float32Array(len);
  out.fill(0);
  for (let h = 0; h < heads; h++) {
    const g = Math.floor(h / rep);
    let max = -Infinity;
    for (let t = 0; t < len; t++) {
      let s = 0;
      for (let d = 0; d < headDim; d++) s += q[h * headDim + d] * k[t * row + g * headDim + d];
      scores[t] = s * scale;
      if (scores[t] > max) max = scores[t];
    }
    let sum = 0;
    for (let t = 0; t < len; t++) {
      scores[t] = Math.exp(scores[t] - max);
      sum += scores[t];
    }
    for (let t = 0; t < len; t++) {
      const p = scores[t] / sum;
      for (let d = 0; d < headDim; d++) out[h * headDim + d] += p * v[t * row + g * headDim + d];
    }
  }
}

/** Mean milliseconds of `fn`, repeated for at least `budgetMs` (after one warm-up call). */
function timePerCall(fn: () => void, budgetMs: number): number {
  fn();
  let calls = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < budgetMs || calls < 3) {
    fn();
    calls++;
  }
  return (performance.now() - t0) / calls;
}

export default async function attentionBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const { heads, kvHeads, headDim } = DIMS;
  const row = kvHeads * headDim;
  const maxLen = LENGTHS[LENGTHS.length - 1];
  const rand = seededRandom(1);
  const k = Float32Array.from({ length: maxLen * row }, () => rand() * 2 - 1);
  const v = Float32Array.from({ length: maxLen * row }, () => rand() * 2 - 1);
  const q = Float32Array.from({ length: heads * headDim }, () => rand() * 2 - 1);
  const cache = new HostKvCache(DIMS);
  cache.reserve(maxLen);
  cache.write(0, 0, maxLen, k, v);
  cache.length = maxLen;
  const kernelOut = new Float32Array(heads * headDim);
  const plainOut = new Float32Array(heads * headDim);

  const rows: Row[] = [];
  for (const len of LENGTHS) {
    ctx.log(`context ${len}…`);
    const kernelMs = timePerCall(() => cache.attend(0, len, q, 0, kernelOut, 0), 400);
    const plainMs = timePerCall(() => plainAttention(q, k, v, len, plainOut), 400);
    let worst = 0;
    for (let i = 0; i < plainOut.length; i++) worst = Math.max(worst, Math.abs(kernelOut[i] - plainOut[i]));
    const bytes = 2 * len * row * 4;
    rows.push({
      context: len,
      kernel_us: round(kernelMs * 1000),
      plain_js_us: round(plainMs * 1000),
      speedup: round(plainMs / kernelMs, 2),
      kernel_read_gb_per_s: round(bytes / (kernelMs / 1000) / 1e9, 2),
      per_token_ms_28_layers: round(28 * kernelMs, 2),
      plain_per_token_ms_28_layers: round(28 * plainMs, 2),
      max_abs_diff: Number(worst.toExponential(1)),
    });
  }
  process.stdout.write(formatTable(rows) + '\n');
  const at = (len: number) => rows.find((r) => r.context === len)!;
  return {
    shape: `${heads} heads over ${kvHeads} key/value heads of ${headDim}`,
    rows,
    speedup_1k: at(1024).speedup,
    speedup_16k: at(16384).speedup,
    per_token_ms_28_layers_4k: at(4096).per_token_ms_28_layers,
  };
}

function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
