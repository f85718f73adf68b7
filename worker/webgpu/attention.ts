/**
 * Causal attention as fused webgpu kernels (flash attention, Dao et al. 2022/2023), forward and backward, for
 * worker/causal-attention.ts's layout: groups of one kv head each, q [G, (T − queryOffset)·rep, hd] with its rows
 * position-major (row i·rep + r is position queryOffset + i, query head r; pre-scaled by 1/sqrt(hd)), k and v
 * [G, T, hd]. Query position p sees keys 0…p, so a trunk's keys (positions before queryOffset) are seen by every
 * query. tfjs's composition (causal-attention.ts batchedAttention) writes the [G, rows, T] scores, the mask, the
 * probabilities and their gradients; here nothing score-sized is ever stored.
 *
 * - Forward: a workgroup takes ROWS_PER_WORKGROUP consecutive query rows of a group, a thread per row (so the rep
 *   query heads sharing the group's kv head read each key tile once, together: grouped-query attention costs no
 *   copy of k or v). It streams key/value tiles through workgroup memory up to the last key its rows see, keeping a
 *   running max and sum per row (online softmax, f32), and writes y and each row's logsumexp, which the backward
 *   needs. Keys past a row's position are skipped, not masked: the visible keys of a tile are a prefix of it.
 * - Backward (FlashAttention-2's): probabilities are recomputed from q, k and the saved logsumexp. Dᵢ = dYᵢ·yᵢ
 *   comes first, from tf ops (O(rows·hd) against the kernels' O(rows·T·hd)), after the logsumexp in one input: so
 *   every kernel binds at most WebGPU's guaranteed 8 storage buffers, the tree input included. A first kernel (tiled
 *   like the forward) gives dQ = Σⱼ dSᵢⱼ·kⱼ with dSᵢⱼ = Pᵢⱼ·(dYᵢ·vⱼ − Dᵢ); a second
 *   takes KEYS_PER_WORKGROUP keys of a group, a thread per key, streams the query rows that see them (with their dY,
 *   logsumexp and D) through workgroup memory, and gives dK = Σᵢ dSᵢⱼ·qᵢ and dV = Σᵢ Pᵢⱼ·dYᵢ. Its sums run over every
 *   query row of the group, so dK and dV add up over the rep query heads that share a kv head.
 *
 * Rows are read and summed as vec4s where hd is a multiple of 4 (f32s otherwise). The loops over a row's elements run
 * to a uniform, not a constant: with constant bounds lavapipe's compiler unrolls them into the tile loops they hold,
 * and a pipeline took minutes to build (the dK/dV kernel at hd 128: 216 s; ~1-5 s with the uniform; measured).
 *
 * Tree layouts (worker/prefix-tree.ts: positions in depth-first order, each seeing its ancestors and itself). In
 * depth-first order a node's subtree is the contiguous range [j, endⱼ), so query position p sees key j exactly when
 * j ≤ p < endⱼ: one int per key says it all, where each query's ancestors would be a list of ranges (one per branch
 * point above it) and a parent index a walk per key. The kernels take an int32 input (treeInput): endⱼ per key, then
 * maxima of it over key blocks, from which they skip work uniformly across a workgroup:
 * - the forward and dQ kernels skip a key tile whose keys' subtrees all end at or before the workgroup's first
 *   position (none of its rows sees any key of it: sibling branches), and mask the others key by key (a hidden key's
 *   probability and dS are exactly 0, its score is never computed);
 * - the dK/dV kernel: the rows that see key j are positions [j, endⱼ), contiguous as in the causal case's [j, T), so
 *   a thread's rows of a tile are a range, and a workgroup streams rows only up to its keys' largest endⱼ.
 * Causal attention (no layout) is the chain whose every endⱼ is T: it keeps the kernels without the input.
 * Queries behind a trunk (queryOffset) see keys by the same rule: positions are the layout's, keys and queries alike.
 *
 * Bounds: float32 only; hd ≤ MAX_HEAD_DIM (each thread keeps its row in private arrays of hd floats); tensors
 * within the device's storage binding (gpu.ts refuses larger ones by name); the grid within 65,535² workgroups.
 * Not done here: f16 storage, dropout, sliding windows, decoding (a few query rows would idle most of a 64-row
 * workgroup; decoding attends over the paged KV cache, paged-attention.ts). Untuned for GPUs: none was at hand when
 * this was written; it is checked and timed on lavapipe (`npm run bench -- webgpu-attention`). A GPU may keep the
 * per-thread arrays in memory rather than registers, since they are indexed by a loop variable it cannot unroll.
 *
 * Two shaders here write two buffers each, and gpu.ts's dispatch makes one output: the other (the forward's
 * logsumexp, the dK/dV kernel's dV) is made here and bound as an input the shader declares read_write.
 */
import * as tf from '@tensorflow/tfjs';
import type { TreeLayout } from '../prefix-tree.ts';
import { asWebGpu, checkBindable, dispatch, GRID_BUILTINS, gridFor, ourKernelRuns, rowLanes, type RowLanes, WORKGROUP_FLOATS } from './gpu.ts';

export const ATTENTION_KERNEL = 'AgentJetAttention';
export const ATTENTION_GRAD_KERNEL = 'AgentJetAttentionGrad';

/** Head dims up to which the kernels run: the dK/dV kernel keeps 4·hd floats per thread (4 KiB at 256: Gemma's hd). */
export const MAX_HEAD_DIM = 256;

/** Query rows per forward and dQ workgroup, one thread each (a common GPU wave or two; lavapipe runs 8-wide). */
const ROWS_PER_WORKGROUP = 64;
/** Keys per dK/dV workgroup, one thread each (as above). */
const KEYS_PER_WORKGROUP = 64;
/** Longest tile streamed through workgroup memory: each thread keeps a value or two per tile row in private arrays. */
const MAX_TILE = 64;

/** Rows of a tile holding `perRow` floats each within the workgroup memory (≥ 7 at MAX_HEAD_DIM). */
const tileRows = (perRow: number) => Math.min(MAX_TILE, Math.floor(WORKGROUP_FLOATS / perRow));

/** Keys per tile of the forward and dQ kernels: a key and a value row each, and under a tree its endⱼ (an i32). */
const keyTileOf = (hd: number, tree: boolean) => tileRows(2 * hd + (tree ? 1 : 0));

/**
 * Dispatches since the thread started; tests check that the model's attention took this path, not the fallback
 * (`tree…`: those of them under a tree layout).
 */
export const attentionStats = { forward: 0, backward: 0, treeForward: 0, treeBackward: 0 };

export class AttentionShapeError extends Error {
  override name = 'AttentionShapeError';
}

/** A layout whose positions are not in depth-first order: subtrees would not be ranges, and the kernels' rule fails. */
export class TreeLayoutError extends Error {
  override name = 'TreeLayoutError';
}

/** `tiles`: workgroups per group; `width`: elements (vec4 or f32) per row, the bound of the loops over a row. */
const UNIFORMS = `struct U { groups : i32, rows : i32, keys : i32, rep : i32, queryOffset : i32, tiles : i32, width : i32, pad0 : i32, };`;

/** Dot product of a row held per thread (`row`, a var<private>) and a row of a workgroup tile at element `base`. */
const dot = (row: string, tile: string, base: string) => `dot_${row}_${tile}(${base})`;
function dotFn(L: RowLanes, row: string, tile: string): string {
  return `fn dot_${row}_${tile}(base : i32) -> f32 {
  var s = 0.0;
  for (var d = 0; d < u.width; d++) { s += ${L.dot(`${row}[d]`, `${tile}[base + d]`)}; }
  return s;
}`;
}

/** A storage binding: its variable, element type and access. */
type Binding = readonly [name: string, type: string, access: 'read' | 'read_write'];
/** The tree input (treeInput), bound last where a layout is followed. */
const TREE_BINDING: Binding = ['tree', 'i32', 'read'];

/** WGSL declarations of storage bindings 0…n−1 in order, then the uniform block U at n. */
function bindingsWgsl(buffers: Binding[]): string {
  const lines = buffers.map(([name, type, access], i) => `@group(0) @binding(${i}) var<storage, ${access}> ${name} : array<${type}>;`);
  return [...lines, `@group(0) @binding(${buffers.length}) var<uniform> u : U;`].join('\n');
}

/**
 * The forward (`grad` false) or the dQ kernel (`grad` true): a thread per query row, key/value tiles of keyTileOf
 * keys through workgroup memory, up to the last key of the workgroup's last row. `tree`: keys are seen by the subtree
 * rule (see the header), the layout's input bound last.
 */
function rowsWgsl(hd: number, grad: boolean, tree: boolean): string {
  const L = rowLanes(hd);
  const n = L.n;
  const keyTile = keyTileOf(hd, tree);
  const wg = ROWS_PER_WORKGROUP;
  const buffers: Binding[] = grad
    ? [
        ['dq', L.t, 'read_write'],
        ['q', L.t, 'read'],
        ['k', L.t, 'read'],
        ['v', L.t, 'read'],
        ['stats', 'f32', 'read'],
        ['dy', L.t, 'read'],
      ]
    : [
        ['y', L.t, 'read_write'],
        ['q', L.t, 'read'],
        ['k', L.t, 'read'],
        ['v', L.t, 'read'],
        ['lse', 'f32', 'read_write'],
      ];
  const bindings = bindingsWgsl(tree ? [...buffers, TREE_BINDING] : buffers);
  // Per row: the forward keeps a running max m and sum l and rescales its accumulator when m grows; the dQ kernel
  // knows the final logsumexp, so each probability is exact at once.
  const start = grad
    ? `for (var d = 0; d < u.width; d++) { dyr[d] = dy[qOff + d]; }
  let L = stats[rowIndex]; // the logsumexp, then D
  let yd = stats[u.groups * u.rows + rowIndex];`
    : `var m = -3.0e38; // below any score: exp(m − score) is 0
  var l = 0.0;`;
  // Under a tree a key of the tile up to this row's position may still be hidden (not an ancestor): its score is not
  // computed, and its probability and dS are 0, so it adds nothing to the sums.
  const seen = 'Es[c] > pos';
  const score = `s[c] = ${dot('qr', 'Ks', `c * ${n}`)}; mt = max(mt, s[c]);`;
  const tile = grad
    ? `for (var c = 0; c < visible; c++) {
        ${tree ? `if (!(${seen})) { s[c] = 0.0; continue; }` : ''}
        let p = exp(${dot('qr', 'Ks', `c * ${n}`)} - L);
        s[c] = p * (${dot('dyr', 'Vs', `c * ${n}`)} - yd);
      }
      for (var d = 0; d < u.width; d++) {
        var a = acc[d];
        for (var c = 0; c < visible; c++) { a = fma(${L.t}(s[c]), Ks[c * ${n} + d], a); }
        acc[d] = a;
      }`
    : `var mt = m;
      for (var c = 0; c < visible; c++) { ${tree ? `if (${seen}) { ${score} }` : score} }
      let alpha = exp(m - mt);
      var lt = 0.0;
      for (var c = 0; c < visible; c++) { s[c] = ${tree ? `select(0.0, exp(s[c] - mt), ${seen})` : 'exp(s[c] - mt)'}; lt += s[c]; }
      l = fma(l, alpha, lt);
      m = mt;
      for (var d = 0; d < u.width; d++) {
        var a = acc[d] * alpha;
        for (var c = 0; c < visible; c++) { a = fma(${L.t}(s[c]), Vs[c * ${n} + d], a); }
        acc[d] = a;
      }`;
  const finish = grad
    ? `for (var d = 0; d < u.width; d++) { dq[qOff + d] = acc[d]; }`
    : `let inv = 1.0 / l;
    for (var d = 0; d < u.width; d++) { y[qOff + d] = acc[d] * inv; }
    lse[rowIndex] = m + log(l);`;
  // The tree input's per-tile maxima of endⱼ follow endⱼ [keys] and the dK/dV kernel's per-workgroup ones.
  const skipTile = tree
    ? `// No key of this tile is an ancestor of a row here when every subtree in it ends by the first row's position.
    if (tree[u.keys + (u.keys + ${KEYS_PER_WORKGROUP - 1}) / ${KEYS_PER_WORKGROUP} + k0 / ${keyTile}] <= firstPos) { continue; }`
    : '';
  return `${UNIFORMS}
${bindings}
var<workgroup> Ks : array<${L.t}, ${keyTile * n}>;
var<workgroup> Vs : array<${L.t}, ${keyTile * n}>;
${tree ? `var<workgroup> Es : array<i32, ${keyTile}>;` : ''}
var<private> qr : array<${L.t}, ${n}>;
${grad ? `var<private> dyr : array<${L.t}, ${n}>;` : ''}
${dotFn(L, 'qr', 'Ks')}
${grad ? dotFn(L, 'dyr', 'Vs') : ''}

@compute @workgroup_size(${wg}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let wgi = i32(wid.y * nwg.x + wid.x);
  if (wgi >= u.groups * u.tiles) { return; }
  let grp = wgi / u.tiles;
  let row0 = (wgi % u.tiles) * ${wg};
  let row = row0 + i32(li);
  let live = row < u.rows;
  let own = min(row, u.rows - 1); // a thread past the last row loads tiles with the others and writes nothing
  let pos = u.queryOffset + own / u.rep;
  ${tree ? 'let firstPos = u.queryOffset + row0 / u.rep;' : ''}
  // Keys [0, keyEnd) are seen by some row of this workgroup: its last row's position and those before.
  let keyEnd = u.queryOffset + (min(row0 + ${wg}, u.rows) - 1) / u.rep + 1;
  let rowIndex = grp * u.rows + own;
  let qOff = rowIndex * ${n};
  let kOff = grp * u.keys * ${n};
  for (var d = 0; d < u.width; d++) { qr[d] = q[qOff + d]; }
  var acc : array<${L.t}, ${n}>;
  var s : array<f32, ${keyTile}>; // per tile key: the score, then its probability (forward) or dS (dQ)
  ${start}
  for (var k0 = 0; k0 < keyEnd; k0 += ${keyTile}) {
    ${skipTile}
    let count = min(${keyTile}, keyEnd - k0) * ${n};
    for (var e = i32(li); e < count; e += ${wg}) {
      Ks[e] = k[kOff + k0 * ${n} + e];
      Vs[e] = v[kOff + k0 * ${n} + e];
    }
    ${tree ? `for (var e = i32(li); e < min(${keyTile}, keyEnd - k0); e += ${wg}) { Es[e] = tree[k0 + e]; }` : ''}
    workgroupBarrier();
    let visible = clamp(pos + 1 - k0, 0, ${keyTile}); // keys k0 … pos of this tile (pos < keyEnd)
    if (visible > 0) {
      ${tile}
    }
    workgroupBarrier();
  }
  if (live) {
    ${finish}
  }
}`;
}

/**
 * The dK/dV kernel: a thread per key, tiles of `rowTile` query rows (q, dY, logsumexp, D) through workgroup memory,
 * from the first row whose position reaches the workgroup's first key. `tree`: the rows that see key j end at
 * position endⱼ, and the workgroup's at its keys' largest (see the header).
 */
function keysWgsl(hd: number, tree: boolean): string {
  const L = rowLanes(hd);
  const n = L.n;
  const rowTile = tileRows(2 * hd + 2);
  const wg = KEYS_PER_WORKGROUP;
  const bindings = bindingsWgsl([
    ['dk', L.t, 'read_write'],
    ['q', L.t, 'read'],
    ['k', L.t, 'read'],
    ['v', L.t, 'read'],
    ['stats', 'f32', 'read'],
    ['dy', L.t, 'read'],
    ['dv', L.t, 'read_write'],
    ...(tree ? [TREE_BINDING] : []),
  ]);
  // Row bounds from positions: a position's rep rows follow queryOffset's; a position before it has none.
  const rowOf = (position: string) => `max(${position} - u.queryOffset, 0) * u.rep`;
  return `${UNIFORMS}
${bindings}
var<workgroup> Qs : array<${L.t}, ${rowTile * n}>;
var<workgroup> Gs : array<${L.t}, ${rowTile * n}>;
var<workgroup> Ls : array<f32, ${rowTile}>;
var<workgroup> Ds : array<f32, ${rowTile}>;
var<private> kr : array<${L.t}, ${n}>;
var<private> vr : array<${L.t}, ${n}>;
${dotFn(L, 'kr', 'Qs')}
${dotFn(L, 'vr', 'Gs')}

@compute @workgroup_size(${wg}, 1, 1)
fn main(${GRID_BUILTINS}) {
  let wgi = i32(wid.y * nwg.x + wid.x);
  if (wgi >= u.groups * u.tiles) { return; }
  let grp = wgi / u.tiles;
  let key0 = (wgi % u.tiles) * ${wg};
  let key = key0 + i32(li);
  let live = key < u.keys;
  let kOff = (grp * u.keys + min(key, u.keys - 1)) * ${n};
  for (var d = 0; d < u.width; d++) { kr[d] = k[kOff + d]; vr[d] = v[kOff + d]; }
  var dka : array<${L.t}, ${n}>;
  var dva : array<${L.t}, ${n}>;
  var pr : array<f32, ${rowTile}>; // per tile row: P and dS at this key
  var ds : array<f32, ${rowTile}>;
  // Row of the first query that sees key j: position max(j, queryOffset), rep rows per position.
  let seenFrom = ${rowOf('key')};
  ${
    tree
      ? `// …and past the last one: position endⱼ (a subtree's end), and the workgroup's rows end at its keys' largest.
  let seenTo = ${rowOf('tree[min(key, u.keys - 1)]')};
  let rowEnd = min(u.rows, ${rowOf(`tree[u.keys + key0 / ${wg}]`)});`
      : 'let rowEnd = u.rows;'
  }
  let qBase = grp * u.rows;
  for (var r0 = ${rowOf('key0')}; r0 < rowEnd; r0 += ${rowTile}) {
    let count = min(${rowTile}, u.rows - r0);
    for (var e = i32(li); e < count * ${n}; e += ${wg}) {
      Qs[e] = q[(qBase + r0) * ${n} + e];
      Gs[e] = dy[(qBase + r0) * ${n} + e];
    }
    for (var e = i32(li); e < count; e += ${wg}) {
      Ls[e] = stats[qBase + r0 + e]; // the logsumexp, then D
      Ds[e] = stats[u.groups * u.rows + qBase + r0 + e];
    }
    workgroupBarrier();
    // This tile's rows that see the key: [first, last) (none for a thread past the last key).
    let first = select(count, clamp(seenFrom - r0, 0, count), live);
    let last = ${tree ? 'clamp(seenTo - r0, 0, count)' : 'count'};
    for (var i = first; i < last; i++) {
      pr[i] = exp(${dot('kr', 'Qs', `i * ${n}`)} - Ls[i]);
      ds[i] = pr[i] * (${dot('vr', 'Gs', `i * ${n}`)} - Ds[i]);
    }
    for (var d = 0; d < u.width; d++) {
      var a = dva[d];
      var b = dka[d];
      for (var i = first; i < last; i++) {
        a = fma(${L.t}(pr[i]), Gs[i * ${n} + d], a);
        b = fma(${L.t}(ds[i]), Qs[i * ${n} + d], b);
      }
      dva[d] = a;
      dka[d] = b;
    }
    workgroupBarrier();
  }
  if (live) {
    for (var d = 0; d < u.width; d++) { dk[kOff + d] = dka[d]; dv[kOff + d] = dva[d]; }
  }
}`;
}

interface Shape {
  groups: number;
  rows: number;
  keys: number;
  hd: number;
  rep: number;
  queryOffset: number;
}

function shapeOf(q: tf.TensorInfo, k: tf.TensorInfo, v: tf.TensorInfo, queryOffset: number): Shape {
  const [groups, rows, hd] = q.shape;
  const keys = k.shape[1];
  const ok =
    q.shape.length === 3 &&
    k.shape.length === 3 &&
    tf.util.arraysEqual(k.shape, v.shape) &&
    k.shape[0] === groups &&
    k.shape[2] === hd &&
    hd <= MAX_HEAD_DIM &&
    Number.isInteger(queryOffset) &&
    queryOffset >= 0 &&
    queryOffset < keys &&
    rows % (keys - queryOffset) === 0 &&
    [q, k, v].every((t) => t.dtype === 'float32');
  if (!ok) throw new AttentionShapeError(`fused attention wants float32 q [G, (T − offset)·rep, hd ≤ ${MAX_HEAD_DIM}], k and v [G, T, hd]; got ${q.shape}, ${k.shape}, ${v.shape}, offset ${queryOffset}`);
  return { groups, rows, keys, hd, rep: rows / (keys - queryOffset), queryOffset };
}

function uniforms(s: Shape, tiles: number): { i32: number }[] {
  return [s.groups, s.rows, s.keys, s.rep, s.queryOffset, tiles, rowLanes(s.hd).n].map((i32) => ({ i32 }));
}

const subtreeEndsCache = new WeakMap<TreeLayout, Int32Array>();

/**
 * Per position of a layout, the end of its subtree (the first position past its descendants) [T]; throws
 * TreeLayoutError unless the layout is in depth-first order with chains as prefix-tree.ts makes them (ancestorRanges,
 * what causalAttention's other paths follow, reads the chains; this rule the parents).
 */
export function subtreeEnds(layout: TreeLayout): Int32Array {
  let ends = subtreeEndsCache.get(layout);
  if (ends) return ends;
  const { parent, chainStart } = layout;
  const t = parent.length;
  ends = new Int32Array(t).fill(t);
  const path: number[] = []; // the nodes from a root down to the previous position
  for (let i = 0; i < t; i++) {
    const p = parent[i];
    // A node's parent is on the path to the node before it (depth-first order); the nodes below the parent end here.
    while (path.length > 0 && path[path.length - 1] !== p) ends[path.pop()!] = i;
    if (p >= 0 && path.length === 0) throw new TreeLayoutError(`position ${i}'s parent ${p} is not an ancestor of position ${i - 1}: not depth-first order`);
    if (chainStart[i] !== (p >= 0 && p === i - 1 ? chainStart[i - 1] : i)) throw new TreeLayoutError(`position ${i}'s chain starts at ${chainStart[i]}, its parent says otherwise`);
    path.push(i);
  }
  subtreeEndsCache.set(layout, ends);
  return ends;
}

/** Length of the tree input for `keys` keys at head dim `hd`: endⱼ, its maxima per dK/dV workgroup, per forward tile. */
const treeInputLength = (keys: number, hd: number) => keys + Math.ceil(keys / KEYS_PER_WORKGROUP) + Math.ceil(keys / keyTileOf(hd, true));

/** The kernels' tree input for a layout at head dim `hd` (the forward's tiles depend on it): see the header. */
function treeInput(layout: TreeLayout, hd: number): Int32Array {
  const ends = subtreeEnds(layout);
  const t = ends.length;
  const out = new Int32Array(treeInputLength(t, hd));
  out.set(ends);
  let at = t;
  for (const block of [KEYS_PER_WORKGROUP, keyTileOf(hd, true)]) {
    for (let j0 = 0; j0 < t; j0 += block) out[at++] = Math.max(...ends.subarray(j0, Math.min(t, j0 + block)));
  }
  return out;
}

/** The tree input among a kernel's inputs, checked against the shape; null without one (causal). */
function treeOf(tree: tf.TensorInfo | undefined, s: Shape): tf.TensorInfo | null {
  if (!tree) return null;
  const want = treeInputLength(s.keys, s.hd);
  if (tree.dtype !== 'int32' || tree.shape.length !== 1 || tree.shape[0] !== want) throw new AttentionShapeError(`the tree input for ${s.keys} keys at head dim ${s.hd} is int32 [${want}]; got ${tree.dtype} [${tree.shape}]`);
  return tree;
}

/**
 * Register both kernels: forward {q, k, v, tree?} → [y, logsumexp [G, rows]]; gradient {q, k, v, stats, dy, tree?}
 * → [dq, dk, dv], stats [2·G, rows] being the logsumexp and then D. With `tree` (treeInput) they follow a tree
 * layout; without it they are causal.
 */
export function registerAttention(): void {
  tf.registerKernel({
    kernelName: ATTENTION_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { q, k, v } = inputs as { q: tf.TensorInfo; k: tf.TensorInfo; v: tf.TensorInfo };
      const s = shapeOf(q, k, v, (attrs as { queryOffset: number }).queryOffset);
      const tree = treeOf(inputs.tree as tf.TensorInfo | undefined, s);
      const gpu = asWebGpu(backend);
      const tiles = Math.ceil(s.rows / ROWS_PER_WORKGROUP);
      // Refusals (a tensor past the storage binding, a grid past the limit) come before the second output is made.
      for (const t of [q, k]) checkBindable(gpu, t.shape);
      const grid = gridFor(s.groups * tiles);
      const lse = gpu.makeTensorInfo([s.groups, s.rows], 'float32');
      const y = dispatch(gpu, {
        key: `attention-forward-${tree ? 'tree-' : ''}${s.hd}`,
        wgsl: () => rowsWgsl(s.hd, false, tree !== null),
        name: 'AttentionForward',
        inputs: [q, k, v, lse, ...(tree ? [tree] : [])],
        output: { shape: q.shape },
        uniforms: uniforms(s, tiles),
        workgroups: grid,
      });
      attentionStats.forward++;
      if (tree) attentionStats.treeForward++;
      return [y, lse];
    },
  });
  tf.registerKernel({
    kernelName: ATTENTION_GRAD_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { q, k, v, stats, dy } = inputs as Record<'q' | 'k' | 'v' | 'stats' | 'dy', tf.TensorInfo>;
      const s = shapeOf(q, k, v, (attrs as { queryOffset: number }).queryOffset);
      if (!tf.util.arraysEqual(stats.shape, [2 * s.groups, s.rows]) || !tf.util.arraysEqual(dy.shape, q.shape)) {
        throw new AttentionShapeError(`the attention gradient wants stats [${2 * s.groups}, ${s.rows}] and dy [${q.shape}]; got [${stats.shape}], [${dy.shape}]`);
      }
      const tree = treeOf(inputs.tree as tf.TensorInfo | undefined, s);
      const treeInputs = tree ? [tree] : [];
      const variant = tree ? 'tree-' : '';
      const gpu = asWebGpu(backend);
      const rowTiles = Math.ceil(s.rows / ROWS_PER_WORKGROUP);
      const keyTiles = Math.ceil(s.keys / KEYS_PER_WORKGROUP);
      for (const t of [q, k]) checkBindable(gpu, t.shape);
      const [rowGrid, keyGrid] = [gridFor(s.groups * rowTiles), gridFor(s.groups * keyTiles)];
      const dv = gpu.makeTensorInfo(k.shape, 'float32');
      const dq = dispatch(gpu, {
        key: `attention-dq-${variant}${s.hd}`,
        wgsl: () => rowsWgsl(s.hd, true, tree !== null),
        name: 'AttentionGradQ',
        inputs: [q, k, v, stats, dy, ...treeInputs],
        output: { shape: q.shape },
        uniforms: uniforms(s, rowTiles),
        workgroups: rowGrid,
      });
      const dk = dispatch(gpu, {
        key: `attention-dkv-${variant}${s.hd}`,
        wgsl: () => keysWgsl(s.hd, tree !== null),
        name: 'AttentionGradKV',
        inputs: [q, k, v, stats, dy, dv, ...treeInputs],
        output: { shape: k.shape },
        uniforms: uniforms(s, keyTiles),
        workgroups: keyGrid,
      });
      attentionStats.backward++;
      if (tree) attentionStats.treeBackward++;
      return [dq, dk, dv];
    },
  });
}

/** Whether causalAttention runs here: webgpu with these kernels, and a head dim they take. */
export function fusedAttentionRuns(headDim: number): boolean {
  return headDim <= MAX_HEAD_DIM && ourKernelRuns(ATTENTION_KERNEL) && ourKernelRuns(ATTENTION_GRAD_KERNEL);
}

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/**
 * Causal attention over groups with its gradient, q [G, (T − queryOffset)·rep, hd] (pre-scaled), k and v [G, T, hd]
 * → q's shape; queries are positions [queryOffset, T). With a tree `layout` of the T positions (every group's), each
 * sees its ancestors and itself only. Webgpu only (see fusedAttentionRuns).
 */
export function fusedCausalAttention(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, queryOffset = 0, layout: TreeLayout | null = null): tf.Tensor3D {
  const attrs = { queryOffset };
  if (layout && layout.parent.length !== k.shape[1]) throw new AttentionShapeError(`a tree layout of ${layout.parent.length} positions for ${k.shape[1]} keys`);
  // Built (and checked) on the host before any kernel runs; uploaded per call, T + a few ints.
  const treeData = layout ? treeInput(layout, q.shape[2]) : null;
  const f = tf.customGrad(((qIn: tf.Tensor, kIn: tf.Tensor, vIn: tf.Tensor, save: tf.GradSaveFunc) => {
    const tree: tf.NamedTensorMap = treeData ? { tree: tf.tensor1d(treeData, 'int32') } : {};
    const [y, lse] = tf.engine().runKernel(ATTENTION_KERNEL, { q: qIn, k: kIn, v: vIn, ...tree }, attrs) as tf.Tensor[];
    // The logsumexp (and the tree input) live on only in the saved copies (none without a gradient).
    save([qIn, kIn, vIn, y, lse, ...Object.values(tree)]);
    return {
      value: y,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [qs, ks, vs, ys, ls, ts] = saved;
        const stats = tf.tidy(() => tf.concat([ls, tf.sum(tf.mul(dy, ys), -1)])); // the logsumexp, then D = rowsum(dY ⊙ Y)
        const grads = tf.engine().runKernel(ATTENTION_GRAD_KERNEL, { q: qs, k: ks, v: vs, stats, dy, ...(ts ? { tree: ts } : {}) }, attrs) as tf.Tensor[];
        stats.dispose(); // released once the queued dispatches that use it are submitted
        return grads;
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(q, k, v) as tf.Tensor3D;
}
