/**
 * A sequence's KV cache on the host (wasm/cpu backends), held in WebAssembly memory so that the SIMD attention kernel
 * (kernels/attention.wat) reads it in place: no copy per step, four lanes per instruction.
 *
 * Positions are stored in pages of PAGE_SLOTS: a page holds, per layer, the keys then the values of its positions as
 * consecutive rows, so the kernel streams a layer's cache a page at a time, and appending never moves what is
 * stored (a memory grows in place). A wasm memory holds at most 4 GiB, so a long cache is split into chunks of at
 * most `maxChunkBytes`, each with its own memory and kernel instance; the kernel returns per head the unnormalised
 * output with its softmax max and sum, and chunks combine exactly (log-sum-exp).
 */
import { ATTENTION_WASM_BASE64 } from './kernels/attention-wasm.ts';

export interface KvDims {
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
}

export interface KvCacheOptions {
  /** Bytes one chunk's memory may reach (default 1 GiB; tests set it small to exercise several chunks). */
  maxChunkBytes?: number;
}

const WASM_PAGE = 65536;
const DEFAULT_MAX_CHUNK_BYTES = 2 ** 30;
/** Positions per page (a power of two: the kernel finds a position's page and slot by shift and mask). */
const PAGE_SHIFT = 4;
const PAGE_SLOTS = 1 << PAGE_SHIFT;

type AttendFn = (q: number, out: number, stats: number, scores: number, k: number, v: number, len: number, shift: number, pageBytes: number, kvh: number, rep: number, hdp: number, scale: number, normalize: number) => void;

let compiled: WebAssembly.Module | null = null;
function attentionModule(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(Uint8Array.from(atob(ATTENTION_WASM_BASE64), (c) => c.charCodeAt(0)));
  return compiled;
}

/** Byte sizes shared by every chunk of caches with the same dims. */
/** Cache dimensions it cannot hold (heads that do not share key/value heads evenly, a page larger than a chunk). */
export class KvCacheShapeError extends RangeError {
  override name = 'KvCacheShapeError';
}

class Layout {
  readonly rep: number;
  /** Head dim padded to the kernel's 16 floats per loop turn (padding lanes hold zeros and add nothing). */
  readonly hdp: number;
  readonly rowBytes: number; // one layer's keys (or values) of one position: KVH · hdp floats
  readonly layerBytes: number; // one layer's keys and values of one page
  readonly valuesAfter: number; // floats from a position's keys to its values (the page's key rows come first)
  readonly pageBytes: number;
  readonly qOff = 0;
  readonly outOff: number;
  readonly statsOff: number;
  readonly kvOff: number;
  /** Positions one chunk holds (whole pages). */
  readonly maxPositions: number;
  readonly maxWasmPages: number;
  readonly scale: number;
  constructor(
    readonly dims: KvDims,
    maxChunkBytes: number,
  ) {
    const { layers, heads, kvHeads, headDim } = dims;
    this.rep = heads / kvHeads;
    this.hdp = Math.ceil(headDim / 16) * 16;
    this.rowBytes = kvHeads * this.hdp * 4;
    this.layerBytes = 2 * PAGE_SLOTS * this.rowBytes;
    this.valuesAfter = (PAGE_SLOTS * this.rowBytes) / 4;
    this.pageBytes = layers * this.layerBytes;
    this.outOff = heads * this.hdp * 4;
    this.statsOff = 2 * this.outOff;
    this.kvOff = Math.ceil((this.statsOff + heads * 8) / 16) * 16;
    this.maxWasmPages = Math.min(65536, Math.ceil(maxChunkBytes / WASM_PAGE));
    // Each page of positions also needs H floats of score scratch per position.
    const pages = Math.floor((this.maxWasmPages * WASM_PAGE - this.kvOff) / this.bytesPerPage());
    if (pages < 1) throw new KvCacheShapeError(`a chunk of ${maxChunkBytes} bytes cannot hold one page of ${PAGE_SLOTS} positions (${this.bytesPerPage()} bytes)`);
    this.maxPositions = pages * PAGE_SLOTS;
    this.scale = 1 / Math.sqrt(headDim);
  }
  private bytesPerPage(): number {
    return this.pageBytes + this.dims.heads * PAGE_SLOTS * 4;
  }
  /** Bytes a chunk of `capacity` positions (a multiple of PAGE_SLOTS) needs. */
  bytesFor(capacity: number): number {
    return this.kvOff + (capacity / PAGE_SLOTS) * this.bytesPerPage();
  }
  /** Float index of the keys of `layer` at chunk-local position `p` (the values follow PAGE_SLOTS rows later). */
  keyIndex(layer: number, p: number): number {
    return (this.kvOff + (p >> PAGE_SHIFT) * this.pageBytes + layer * this.layerBytes + (p & (PAGE_SLOTS - 1)) * this.rowBytes) / 4;
  }
}

export class KvCacheMemoryError extends Error {
  override name = 'KvCacheMemoryError';
}

/** Run an allocation of wasm memory; when the system refuses it, say how much the KV cache asked for. */
function allocate<T>(fn: () => T, bytes: number): T {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    throw new KvCacheMemoryError(`could not allocate ${(bytes / 2 ** 20).toFixed(0)} MiB for a sequence's KV cache (${err.message}): fewer concurrent requests or shorter contexts need less`, { cause: err });
  }
}

/** Positions [start, start + capacity) of one cache, in one memory. */
class Chunk {
  readonly memory: WebAssembly.Memory;
  readonly attend: AttendFn;
  f32: Float32Array;
  capacity = 0;
  constructor(
    private readonly layout: Layout,
    capacity: number,
  ) {
    this.memory = allocate(() => new WebAssembly.Memory({ initial: Math.ceil(layout.bytesFor(capacity) / WASM_PAGE), maximum: layout.maxWasmPages }), layout.bytesFor(capacity));
    this.attend = new WebAssembly.Instance(attentionModule(), { env: { memory: this.memory } }).exports.attend as AttendFn;
    this.f32 = new Float32Array(this.memory.buffer);
    this.capacity = capacity;
  }
  /** Room for `capacity` positions (growing the memory in place keeps what it holds). */
  grow(capacity: number): void {
    if (capacity <= this.capacity) return;
    const pages = Math.ceil(this.layout.bytesFor(capacity) / WASM_PAGE) - this.memory.buffer.byteLength / WASM_PAGE;
    if (pages > 0) allocate(() => this.memory.grow(pages), this.layout.bytesFor(capacity));
    this.f32 = new Float32Array(this.memory.buffer);
    this.capacity = capacity;
  }
  /** Byte offset of the score scratch (after the pages, so it moves when the chunk grows). */
  get scoresOff(): number {
    return this.layout.kvOff + (this.capacity / PAGE_SLOTS) * this.layout.pageBytes;
  }
}

/** `heads` vectors of `min(fromStride, toStride)` floats from one layout of heads to another (padded or not). */
function copyHeads(from: Float32Array, fromOffset: number, fromStride: number, to: Float32Array, toOffset: number, toStride: number, heads: number): void {
  if (fromStride === toStride) {
    to.set(from.subarray(fromOffset, fromOffset + heads * fromStride), toOffset);
    return;
  }
  const n = Math.min(fromStride, toStride);
  for (let h = 0; h < heads; h++) to.set(from.subarray(fromOffset + h * fromStride, fromOffset + h * fromStride + n), toOffset + h * toStride);
}

export class HostKvCache {
  /** Positions cached so far (the caller advances it once every layer of a position is written). */
  length = 0;
  /** The token ids at positions [0, length), kept by the caller (what a later prompt's prefix is matched against). */
  tokens: number[] = [];
  private readonly maxChunkBytes: number;
  private readonly layout: Layout;
  private readonly chunks: Chunk[] = [];
  /** Per chunk, per head: softmax max and sum (when combining chunks). */
  private readonly partMax: Float64Array;
  private readonly partSum: Float64Array;

  constructor(
    readonly dims: KvDims,
    options: KvCacheOptions = {},
  ) {
    if (dims.heads % dims.kvHeads !== 0) throw new KvCacheShapeError(`${dims.heads} heads cannot share ${dims.kvHeads} key/value heads`);
    this.maxChunkBytes = options.maxChunkBytes ?? DEFAULT_MAX_CHUNK_BYTES;
    this.layout = new Layout(dims, this.maxChunkBytes);
    this.partMax = new Float64Array(dims.heads);
    this.partSum = new Float64Array(dims.heads);
  }

  /** Make room for `n` positions. */
  reserve(n: number): void {
    const per = this.layout.maxPositions;
    const needed = Math.ceil(n / per);
    for (let i = 0; i < needed; i++) {
      const want = Math.ceil((i < needed - 1 ? per : n - i * per) / PAGE_SLOTS) * PAGE_SLOTS;
      const chunk = this.chunks[i];
      if (!chunk) this.chunks.push(new Chunk(this.layout, want));
      else if (chunk.capacity < want) chunk.grow(Math.min(per, Math.max(want, 2 * chunk.capacity)));
    }
  }

  /** Bytes of memory this cache holds. */
  get bytes(): number {
    return this.chunks.reduce((total, c) => total + c.memory.buffer.byteLength, 0);
  }

  /** A new cache holding this one's first `n` positions (copied page by page; the two never share memory). */
  copyPrefix(n: number): HostKvCache {
    if (n > this.length) throw new RangeError(`cannot copy ${n} positions of a cache holding ${this.length}`);
    const copy = new HostKvCache(this.dims, { maxChunkBytes: this.maxChunkBytes });
    copy.reserve(n);
    const { kvOff, pageBytes, maxPositions } = this.layout;
    for (let c = 0; c * maxPositions < n; c++) {
      const pages = Math.ceil(Math.min(maxPositions, n - c * maxPositions) / PAGE_SLOTS);
      const from = new Uint8Array(this.chunks[c].memory.buffer, kvOff, pages * pageBytes);
      new Uint8Array(copy.chunks[c].memory.buffer, kvOff, pages * pageBytes).set(from);
    }
    copy.length = n;
    copy.tokens = this.tokens.slice(0, n);
    return copy;
  }

  /**
   * Store keys and values of `count` positions from `pos` on, for one layer: `k` and `v` hold `count` rows of
   * KVH · headDim floats from `offset`. The positions must be reserved.
   */
  write(layer: number, pos: number, count: number, k: Float32Array, v: Float32Array, offset = 0): void {
    const { hdp, rowBytes, maxPositions, valuesAfter } = this.layout;
    const { kvHeads, headDim } = this.dims;
    const rowFloats = kvHeads * headDim;
    let i = 0;
    while (i < count) {
      const p = pos + i;
      const local = p % maxPositions;
      const f32 = this.chunks[Math.floor(p / maxPositions)].f32;
      const kAt = this.layout.keyIndex(layer, local);
      const src = offset + i * rowFloats;
      if (hdp === headDim) {
        // The rest of this page's slots are consecutive rows: one copy each for keys and values.
        const run = Math.min(count - i, PAGE_SLOTS - (local & (PAGE_SLOTS - 1)));
        f32.set(k.subarray(src, src + run * rowFloats), kAt);
        f32.set(v.subarray(src, src + run * rowFloats), kAt + valuesAfter);
        i += run;
        continue;
      }
      // Padding lanes must read as zeros: this place may have held the score scratch before the chunk grew.
      f32.fill(0, kAt, kAt + rowBytes / 4);
      f32.fill(0, kAt + valuesAfter, kAt + valuesAfter + rowBytes / 4);
      for (let g = 0; g < kvHeads; g++) {
        f32.set(k.subarray(src + g * headDim, src + (g + 1) * headDim), kAt + g * hdp);
        f32.set(v.subarray(src + g * headDim, src + (g + 1) * headDim), kAt + valuesAfter + g * hdp);
      }
      i++;
    }
  }

  /** Copies of one layer's keys and values at positions [0, length): KVH · headDim floats per position. */
  read(layer: number): { k: Float32Array; v: Float32Array } {
    const { hdp, maxPositions, valuesAfter } = this.layout;
    const { kvHeads, headDim } = this.dims;
    const rowFloats = kvHeads * headDim;
    const k = new Float32Array(this.length * rowFloats);
    const v = new Float32Array(this.length * rowFloats);
    for (let p = 0; p < this.length; p++) {
      const f32 = this.chunks[Math.floor(p / maxPositions)].f32;
      const kAt = this.layout.keyIndex(layer, p % maxPositions);
      copyHeads(f32, kAt, hdp, k, p * rowFloats, headDim, kvHeads);
      copyHeads(f32, kAt + valuesAfter, hdp, v, p * rowFloats, headDim, kvHeads);
    }
    return { k, v };
  }

  /**
   * Attention of one query row (H · headDim floats at `q[qOffset]`, normalised and rotated) over positions
   * [0, len) of `layer`: writes H · headDim floats at `out[outOffset]`.
   */
  attend(layer: number, len: number, q: Float32Array, qOffset: number, out: Float32Array, outOffset: number): void {
    const { hdp, layerBytes, pageBytes, maxPositions, rep, kvOff, qOff, outOff, statsOff, scale, valuesAfter } = this.layout;
    const { heads, kvHeads, headDim } = this.dims;
    const parts = Math.ceil(len / maxPositions);
    const k = kvOff + layer * layerBytes;
    const v = k + 4 * valuesAfter;
    for (let c = 0; c < parts; c++) {
      const chunk = this.chunks[c];
      copyHeads(q, qOffset, headDim, chunk.f32, qOff / 4, hdp, heads);
      // One chunk (the usual case) normalises in the kernel; several leave that to the combination below.
      chunk.attend(qOff, outOff, statsOff, chunk.scoresOff, k, v, Math.min(maxPositions, len - c * maxPositions), PAGE_SHIFT, pageBytes, kvHeads, rep, hdp, scale, parts === 1 ? 1 : 0);
      if (parts === 1) copyHeads(chunk.f32, outOff / 4, hdp, out, outOffset, headDim, heads);
      else this.accumulate(c, chunk.f32, out, outOffset);
    }
    if (parts === 1) return;
    for (let h = 0; h < heads; h++) {
      const inv = 1 / this.partSum[h];
      for (let d = 0; d < headDim; d++) out[outOffset + h * headDim + d] *= inv;
    }
  }

  /** Fold chunk `c`'s unnormalised output into `out`, rescaling what earlier chunks left there (online softmax). */
  private accumulate(c: number, f32: Float32Array, out: Float32Array, outOffset: number): void {
    const { hdp, outOff, statsOff } = this.layout;
    const { heads, headDim } = this.dims;
    for (let h = 0; h < heads; h++) {
      const m = f32[statsOff / 4 + 2 * h];
      const s = f32[statsOff / 4 + 2 * h + 1];
      const src = outOff / 4 + h * hdp;
      const dst = outOffset + h * headDim;
      if (c === 0) {
        out.set(f32.subarray(src, src + headDim), dst);
        this.partMax[h] = m;
        this.partSum[h] = s;
        continue;
      }
      const top = Math.max(this.partMax[h], m);
      const before = Math.exp(this.partMax[h] - top);
      const now = Math.exp(m - top);
      for (let d = 0; d < headDim; d++) out[dst + d] = out[dst + d] * before + f32[src + d] * now;
      this.partMax[h] = top;
      this.partSum[h] = this.partSum[h] * before + s * now;
    }
  }
}
