import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { assembleKernel, kernelModulePath, kernelModuleSource } from '../build/kernels.ts';
import { HostKvCache, type KvDims } from './kv-cache.ts';
import { seededRandom } from './common/random.ts';

/** Decode attention in float64, straight from the definition: softmax(q·k / √hd) · v per head, GQA by h / rep. */
function referenceAttention(dims: KvDims, q: Float32Array, k: Float32Array[], v: Float32Array[]): Float64Array {
  const { heads, kvHeads, headDim } = dims;
  const rep = heads / kvHeads;
  const out = new Float64Array(heads * headDim);
  for (let h = 0; h < heads; h++) {
    const g = Math.floor(h / rep);
    const s = k.map((row) => {
      let dot = 0;
      for (let d = 0; d < headDim; d++) dot += q[h * headDim + d] * row[g * headDim + d];
      return dot / Math.sqrt(headDim);
    });
    const m = Math.max(...s);
    const e = s.map((x) => Math.exp(x - m));
    const total = e.reduce((a, b) => a + b, 0);
    for (let t = 0; t < k.length; t++) for (let d = 0; d < headDim; d++) out[h * headDim + d] += (e[t] / total) * v[t][g * headDim + d];
  }
  return out;
}

function randomRows(n: number, width: number, scale: number, rand: () => number): Float32Array[] {
  return Array.from({ length: n }, () => Float32Array.from({ length: width }, () => (rand() * 2 - 1) * scale));
}

/** A cache filled one position at a time, as decoding does (reserve, write every layer, advance). */
function filledCache(dims: KvDims, k: Float32Array[][], v: Float32Array[][], maxChunkBytes?: number): HostKvCache {
  const cache = new HostKvCache(dims, { maxChunkBytes });
  for (let t = 0; t < k[0].length; t++) {
    cache.reserve(t + 1);
    for (let l = 0; l < dims.layers; l++) cache.write(l, t, 1, k[l][t], v[l][t]);
    cache.length = t + 1;
  }
  return cache;
}

function maxRelDiff(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / (1e-3 + Math.abs(want[i])));
  return worst;
}

describe('SIMD decode attention over a host KV cache', () => {
  it('the committed kernel bytes are what its source assembles to', async () => {
    const committed = await readFile(kernelModulePath('attention'), 'utf8');
    expect(committed).toBe(kernelModuleSource('attention', await assembleKernel('attention')));
  });

  const shapes: { name: string; dims: KvDims }[] = [
    { name: 'grouped queries (4 heads over 2)', dims: { layers: 2, heads: 4, kvHeads: 2, headDim: 16 } },
    { name: 'head dim not a multiple of four (padded lanes)', dims: { layers: 1, heads: 6, kvHeads: 3, headDim: 6 } },
    { name: 'one query head per key head', dims: { layers: 3, heads: 2, kvHeads: 2, headDim: 8 } },
  ];
  for (const { name, dims } of shapes) {
    it(`matches float64 attention at every length: ${name}`, () => {
      const rand = seededRandom(7);
      const width = dims.kvHeads * dims.headDim;
      const len = 37;
      // Large keys spread the scores over tens of units: the softmax's exp sees its whole range.
      const k = Array.from({ length: dims.layers }, () => randomRows(len, width, 6, rand));
      const v = Array.from({ length: dims.layers }, () => randomRows(len, width, 1, rand));
      const cache = filledCache(dims, k, v);
      const q = Float32Array.from({ length: dims.heads * dims.headDim }, () => (rand() * 2 - 1) * 3);
      const out = new Float32Array(dims.heads * dims.headDim + 5);
      for (const n of [1, 2, 3, 4, 5, 17, 37]) {
        for (let l = 0; l < dims.layers; l++) {
          cache.attend(l, n, q, 0, out, 5);
          // float32 scores of tens of units carry ~1e-5 absolute error, which exp turns into relative error
          expect(maxRelDiff(out.subarray(5), referenceAttention(dims, q, k[l].slice(0, n), v[l].slice(0, n)))).toBeLessThan(1e-4);
        }
      }
      for (let l = 0; l < dims.layers; l++) {
        const back = cache.read(l);
        expect(Array.from(back.k)).toEqual(k[l].flatMap((row) => Array.from(row)));
        expect(Array.from(back.v)).toEqual(v[l].flatMap((row) => Array.from(row)));
      }
    });
  }

  it('a cache split over several memories gives what one memory gives', () => {
    const dims = { layers: 2, heads: 4, kvHeads: 2, headDim: 8 };
    const rand = seededRandom(3);
    const len = 520;
    const k = Array.from({ length: dims.layers }, () => randomRows(len, 16, 4, rand));
    const v = Array.from({ length: dims.layers }, () => randomRows(len, 16, 1, rand));
    const whole = filledCache(dims, k, v);
    // A 64 KiB memory holds 7 pages of 16 positions of this shape (heads padded to 16 floats: 8 KiB of keys and
    // values and 256 bytes of scores per page): 520 positions take five.
    const split = filledCache(dims, k, v, 65536);
    const q = Float32Array.from({ length: 32 }, () => rand() * 2 - 1);
    const a = new Float32Array(32);
    const b = new Float32Array(32);
    for (const n of [1, 112, 113, 224, 225, 520]) {
      whole.attend(1, n, q, 0, a, 0);
      split.attend(1, n, q, 0, b, 0);
      expect(maxRelDiff(b, a)).toBeLessThan(5e-5);
      expect(maxRelDiff(b, referenceAttention(dims, q, k[1].slice(0, n), v[1].slice(0, n)))).toBeLessThan(5e-5);
    }
    expect(split.read(0).k).toEqual(whole.read(0).k);
  });

  it('rejects shapes it cannot hold, saying why', () => {
    const shapeError = expect.objectContaining({ name: 'KvCacheShapeError' });
    expect(() => new HostKvCache({ layers: 1, heads: 3, kvHeads: 2, headDim: 8 })).toThrow(shapeError);
    expect(() => new HostKvCache({ layers: 64, heads: 64, kvHeads: 64, headDim: 256 }, { maxChunkBytes: 65536 })).toThrow(shapeError);
  });
});
