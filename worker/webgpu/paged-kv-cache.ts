/**
 * Keys and values of every running sequence on the webgpu device, in one pool of pages allocated once (vLLM's
 * PagedAttention, Kwon et al. 2023): a sequence owns a list of pages (its page table), takes a page when its length
 * crosses a page boundary and gives them all back when it ends, so nothing is copied as a sequence grows (tensor-
 * decode.ts's TensorKvCache copies a whole layer's cache per step: tfjs has no in-place update) and every sequence of
 * a batch is attended in one dispatch (paged-attention.ts).
 *
 * Layout: per layer one float32 tensor [pages, 2, KVH, PAGE_SLOTS, hd] (keys then values of a page; within each, the
 * PAGE_SLOTS rows of one kv head are consecutive, so a workgroup attending one kv head reads a page's rows as one
 * run). A position p of a sequence lives at page `pages[p / PAGE_SLOTS]`, slot `p % PAGE_SLOTS`; its "slot index" is
 * page · PAGE_SLOTS + slot. Our kernels write these tensors in place (bound read_write, like attention.ts's second
 * outputs); tfjs never sees them change, which is safe because nothing but these kernels and the pool reads them.
 *
 * The append kernel here writes many positions at once (a prefill's prompts); a decode step's one position per
 * sequence is written by the attention kernel itself, before it attends (one dispatch per layer).
 *
 * A prompt that starts like a finished sequence shares that sequence's full pages (`share`, counted per page;
 * paged-prefix-store.ts keeps finished sequences and gives their pages back when the pool runs short).
 *
 * Bounds: one layer's pool within the device's storage binding (gpu.ts's checkBindable; the page count is capped to
 * fit), and the pages the caller asks for (PagedKvPoolFullError names it when a batch needs more than are free).
 */
import * as tf from '@tensorflow/tfjs';
import { asWebGpu, dispatch, ELEMENTWISE_WORKGROUP, FLAT_INDEX, GRID_BUILTINS, gridFor, rowLanes } from './gpu.ts';

/**
 * Positions per page: at most PAGE_SLOTS − 1 positions of room are wasted per sequence, and a 32k context's page
 * table is 2k entries (uploaded each step). A power of two, as kv-cache.ts's host pages.
 */
export const PAGE_SLOTS = 16;

export const PAGED_APPEND_KERNEL = 'AgentJetPagedAppend';

/** Dispatches since the thread started (tests check that the paged path, not the fallback, ran). */
export const pagedStats = { append: 0, attention: 0 };

/** A batch needs more pages than the pool has free; nothing was taken. */
export class PagedKvPoolFullError extends Error {
  override name = 'PagedKvPoolFullError';
}

/** Dimensions or arguments the pool or its kernels do not take. */
export class PagedKvShapeError extends Error {
  override name = 'PagedKvShapeError';
}

export interface PagedKvDims {
  layers: number;
  kvHeads: number;
  headDim: number;
}

/** Floats of one page of one layer (keys and values). */
export const pageFloats = (d: PagedKvDims) => 2 * d.kvHeads * PAGE_SLOTS * d.headDim;

/**
 * Pages a pool may hold: what `maxBytes` (all layers) allows, what one layer's tensor within `maxBindingBytes`
 * allows, and no more than `wanted` (callers pass what their sequences can ever use).
 */
export function poolPages(dims: PagedKvDims, maxBytes: number, maxBindingBytes: number, wanted: number): number {
  const layerPage = 4 * pageFloats(dims);
  return Math.max(0, Math.min(wanted, Math.floor(maxBytes / (layerPage * dims.layers)), Math.floor(maxBindingBytes / layerPage)));
}

/** poolPages under the active webgpu backend's storage binding limit. */
export function devicePoolPages(dims: PagedKvDims, maxBytes: number, wanted: number): number {
  return poolPages(dims, maxBytes, asWebGpu(tf.backend()).device.limits.maxStorageBufferBindingSize, wanted);
}

/** One sequence's place in a pool; `length` positions are written (the caller advances it). Release with the pool. */
export class PagedKvSequence {
  length = 0;
  /** Page ids, in position order. */
  readonly pages: number[] = [];
  /** The tokens whose keys and values it holds, in order (the caller keeps them with `length`): what a prefix store matches. */
  tokens: number[] = [];
  constructor(readonly pool: PagedKvPool) {}
}

export class PagedKvPool {
  /** Per layer [pages, 2, KVH, PAGE_SLOTS, hd]. */
  readonly layers: tf.Tensor[];
  /** Pages nobody holds, the most recently freed last (taken first). */
  private readonly freeList: number[];
  /** Sequences holding each page: a full page of a prefix is shared (`share`) and freed when its last holder lets go. */
  private readonly holders: Int32Array;
  /**
   * Called when a reservation needs `pages` more than are free, before it fails: a prefix store gives back the pages
   * of sequences it keeps (paged-prefix-store.ts).
   */
  reclaim: ((pages: number) => void) | null = null;

  constructor(
    readonly dims: PagedKvDims,
    readonly pages: number,
  ) {
    if (!Number.isInteger(pages) || pages < 1) throw new PagedKvShapeError(`a pool needs at least one page, got ${pages}`);
    // tf.fill runs on the device (tf.zeros would build the whole pool on the host first, then upload it).
    this.layers = Array.from({ length: dims.layers }, () => tf.fill([pages, 2, dims.kvHeads, PAGE_SLOTS, dims.headDim], 0));
    this.freeList = Array.from({ length: pages }, (_, i) => pages - 1 - i);
    this.holders = new Int32Array(pages);
  }

  get freePages(): number {
    return this.freeList.length;
  }

  sequence(): PagedKvSequence {
    return new PagedKvSequence(this);
  }

  /** Give each sequence the pages to hold `lengths[i]` positions; all or nothing (PagedKvPoolFullError). */
  reserve(seqs: PagedKvSequence[], lengths: number[]): void {
    const needs = seqs.map((s, i) => Math.max(0, Math.ceil(lengths[i] / PAGE_SLOTS) - s.pages.length));
    const total = needs.reduce((a, b) => a + b, 0);
    if (total > this.freeList.length) this.reclaim?.(total - this.freeList.length);
    if (total > this.freeList.length) throw new PagedKvPoolFullError(`the device KV cache needs ${total} more pages of ${PAGE_SLOTS} positions and has ${this.freeList.length} free of ${this.pages}: fewer concurrent requests or shorter contexts need fewer`);
    seqs.forEach((s, i) => {
      if (s.pool !== this) throw new PagedKvShapeError('a sequence of another pool');
      for (let k = 0; k < needs[i]; k++) {
        const page = this.freeList.pop()!;
        this.holders[page] = 1;
        s.pages.push(page);
      }
    });
  }

  /**
   * A new sequence holding the first `length` positions of `source` (a whole number of pages, all written) without
   * copying them: the pages are shared. Nobody writes a shared page: the new sequence appends at `length` and later,
   * in pages of its own, and `source` must be finished (a kept prefix), so it appends nothing.
   */
  share(source: PagedKvSequence, length: number): PagedKvSequence {
    if (source.pool !== this) throw new PagedKvShapeError('a sequence of another pool');
    if (length % PAGE_SLOTS !== 0 || length > source.length) throw new PagedKvShapeError(`a shared prefix is whole written pages: ${length} positions of a sequence of ${source.length}`);
    const seq = this.sequence();
    for (const page of source.pages.slice(0, length / PAGE_SLOTS)) {
      this.holders[page]++;
      seq.pages.push(page);
    }
    seq.length = length;
    seq.tokens = source.tokens.slice(0, length);
    return seq;
  }

  /** Let go of a sequence's pages; a page nobody else holds is free again (its contents overwritten by whoever takes it next). */
  release(seq: PagedKvSequence): void {
    while (seq.pages.length > 0) {
      const page = seq.pages.pop()!;
      if (--this.holders[page] === 0) this.freeList.push(page);
    }
    seq.length = 0;
    seq.tokens = [];
  }

  /** Slot index (page · PAGE_SLOTS + slot) of position `pos` of `seq`, which must be reserved. */
  slotOf(seq: PagedKvSequence, pos: number): number {
    const page = seq.pages[Math.floor(pos / PAGE_SLOTS)];
    if (page === undefined) throw new PagedKvShapeError(`position ${pos} is not reserved (${seq.pages.length} pages)`);
    return page * PAGE_SLOTS + (pos % PAGE_SLOTS);
  }

  /**
   * The batch's lengths and page tables as one int32 array [B, 1 + width], row b = [lengths[b], its pages…] (unused
   * entries 0), width the most pages a sequence needs: what paged-attention.ts reads.
   */
  pageTable(seqs: PagedKvSequence[], lengths: number[]): { table: Int32Array; width: number } {
    const width = Math.max(1, ...lengths.map((n) => Math.ceil(n / PAGE_SLOTS)));
    const table = new Int32Array(seqs.length * (1 + width));
    seqs.forEach((s, b) => {
      const need = Math.ceil(lengths[b] / PAGE_SLOTS);
      if (need > s.pages.length) throw new PagedKvShapeError(`length ${lengths[b]} is not reserved (${s.pages.length} pages)`);
      table[b * (1 + width)] = lengths[b];
      for (let i = 0; i < need; i++) table[b * (1 + width) + 1 + i] = s.pages[i];
    });
    return { table, width };
  }

  dispose(): void {
    tf.dispose(this.layers);
    this.layers.length = 0;
  }
}

/** Threads per append workgroup: one per element, as gpu.ts's elementwise shaders. */
const APPEND_WORKGROUP = ELEMENTWISE_WORKGROUP;

function appendWgsl(hd: number): string {
  const { t } = rowLanes(hd);
  return `struct U { rows : i32, kvh : i32, width : i32, kStride : i32, kOff : i32, vStride : i32, vOff : i32, pad0 : i32, };
@group(0) @binding(0) var<storage, read_write> unused : array<f32>;
@group(0) @binding(1) var<storage, read_write> pool : array<${t}>;
@group(0) @binding(2) var<storage, read> ks : array<${t}>;
@group(0) @binding(3) var<storage, read> vs : array<${t}>;
@group(0) @binding(4) var<storage, read> slots : array<i32>;
@group(0) @binding(5) var<uniform> u : U;

@compute @workgroup_size(${APPEND_WORKGROUP}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let i = ${FLAT_INDEX};
  if (i == 0) { unused[0] = 0.0; } // the one output gpu.ts's dispatch makes: written so that it stays bound
  if (i >= u.rows * u.kvh * u.width) { return; }
  let e = i % u.width;
  let g = (i / u.width) % u.kvh;
  let row = i / (u.width * u.kvh);
  let s = slots[row];
  if (s < 0) { return; } // padding of a shorter prompt
  let key = (((s / ${PAGE_SLOTS}) * 2 * u.kvh + g) * ${PAGE_SLOTS} + s % ${PAGE_SLOTS}) * u.width + e;
  pool[key] = ks[(row * u.kStride + u.kOff + g) * u.width + e];
  pool[key + u.kvh * ${PAGE_SLOTS} * u.width] = vs[(row * u.vStride + u.vOff + g) * u.width + e];
}`;
}

export interface AppendAttrs {
  /** k's rows hold kStride heads of hd; the KVH keys start at head kOff (likewise v). */
  kStride: number;
  kOff: number;
  vStride: number;
  vOff: number;
}

/**
 * Register the append kernel: {pool, k [rows, kStride, hd], v [rows, vStride, hd], slots int32 [rows]} → a 1-element
 * placeholder (gpu.ts's dispatch always makes an output; the pool is written in place). Row r goes to slot index
 * slots[r]; a negative slot skips the row.
 */
export function registerPagedAppend(): void {
  tf.registerKernel({
    kernelName: PAGED_APPEND_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { pool, k, v, slots } = inputs as Record<'pool' | 'k' | 'v' | 'slots', tf.TensorInfo>;
      const a = attrs as unknown as AppendAttrs;
      const [, , kvh, , hd] = pool.shape;
      const rows = slots.shape[0];
      const ok =
        pool.shape.length === 5 &&
        pool.shape[1] === 2 &&
        pool.shape[3] === PAGE_SLOTS &&
        k.shape.length === 3 &&
        v.shape.length === 3 &&
        k.shape[0] === rows &&
        v.shape[0] === rows &&
        k.shape[1] === a.kStride &&
        v.shape[1] === a.vStride &&
        k.shape[2] === hd &&
        v.shape[2] === hd &&
        a.kOff + kvh <= a.kStride &&
        a.vOff + kvh <= a.vStride &&
        slots.dtype === 'int32' &&
        [pool, k, v].every((t) => t.dtype === 'float32');
      if (!ok) throw new PagedKvShapeError(`paged append wants a pool [pages, 2, KVH, ${PAGE_SLOTS}, hd], k and v [rows, stride, hd] holding KVH heads from their offset, int32 slots [rows]; got ${pool.shape}, ${k.shape}, ${v.shape}, ${slots.shape} (${JSON.stringify(a)})`);
      const { n } = rowLanes(hd);
      const out = dispatch(asWebGpu(backend), {
        key: `paged-append-${hd}`,
        wgsl: () => appendWgsl(hd),
        name: 'PagedAppend',
        inputs: [pool, k, v, slots],
        output: { shape: [1] },
        uniforms: [rows, kvh, n, a.kStride, a.kOff, a.vStride, a.vOff].map((i32) => ({ i32 })),
        workgroups: gridFor(Math.ceil((rows * kvh * n) / APPEND_WORKGROUP)),
      });
      pagedStats.append++;
      return out;
    },
  });
}

/** Write rows of k and v ([rows, stride, hd], KVH heads from the offsets) into `pool` at `slots` (webgpu only). */
export function pagedAppend(pool: tf.Tensor, k: tf.Tensor3D, v: tf.Tensor3D, slots: tf.Tensor1D, attrs: AppendAttrs): void {
  const placeholder = tf.engine().runKernel(PAGED_APPEND_KERNEL, { pool, k, v, slots }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor;
  placeholder.dispose();
}
