/**
 * The two skeletons every product shader is built on (matmul.ts's plain products, fused-matmul.ts's products with a
 * norm folded in and a SwiGLU folded out), and their tiling. A skeleton owns the work split, the staging of A, the K
 * loop and the stores; a shader fills in what it reads (each operand's layout, the norm), how many products share A's
 * staging (one, or gate and up), and what it stores from their sums.
 * - tiled (training, prefill): each workgroup of 16×16 threads computes a 64×64 block of C, staging 64×16 of A and
 *   16×64 of each B in workgroup memory per step along K; each thread accumulates a 4×4 register block per product,
 *   its rows and columns 16 apart so that neighbouring threads load and store neighbouring addresses.
 * - skinny (decoding: at most SKINNY_MAX_ROWS rows of A): each thread owns one column of C for every row of A and
 *   walks a quarter of K, reading B once for all rows; the four partial sums meet in workgroup memory.
 */

/** Output block of one tiled workgroup (rows and columns of C); 16×16 threads × a 4×4 register block each. */
export const TILE = 64;
/** Depth of the K step staged in workgroup memory: 64×16 + 16×64 floats = 8 KiB, well under the 16 KiB minimum. */
export const TILE_K = 16;
/** Threads per workgroup side in the tiled shader; TILE / TILE_THREADS outputs per thread per side. */
export const TILE_THREADS = 16;
export const PER_THREAD = TILE / TILE_THREADS;

/** Rows of A up to which the skinny shader runs (a decode step's batch of sequences); one pipeline per row count. */
export const SKINNY_MAX_ROWS = 8;
/** Columns of C per skinny workgroup (one per thread of a K slice). */
export const SKINNY_COLS = 64;
/** K slices per skinny workgroup: 4 × 64 = 256 threads, and four reads of B in flight per column. */
export const SKINNY_SLICES = 4;
/** K positions of A staged per step in the skinny shader (≤ 8 rows × 64 = 2 KiB). */
export const SKINNY_K_BLOCK = 64;
/** Threads of a skinny workgroup. */
export const SKINNY_THREADS = SKINNY_COLS * SKINNY_SLICES;

/** What a product shader puts into a skeleton. */
export interface ProductShader {
  /** Enables, uniforms (with m, n, k) and bindings, `c` the f32 output among them; then any helper functions. */
  header: string;
  /** Further workgroup arrays (a norm's partial sums). */
  workgroupMemory?: string;
  /** Statements at the top of `main`, before the K loop (batch offsets). */
  prologue?: string;
  /** Statements every thread runs once a K step of A is staged in `As` (a norm's sums of squares). */
  afterStaging?: string;
  /** Statements every thread runs after the K loop, before the stores (a norm's reduction). */
  beforeStores?: string;
  /**
   * A's value at row `row` and K position `kk`; `r` is the row within the workgroup's block (for per-row workgroup
   * data). All three are in scope and in range.
   */
  readA: string;
  /** Per product, B's value at K position `kk` and column `col`, in scope and in range. */
  readB: readonly string[];
  /**
   * The value stored from the products' sums (one expression per product), and where it goes (`row`, `col` and the
   * row within the block, `r`, in scope).
   */
  output: (sums: readonly string[]) => string;
  outputIndex: string;
}

/** Options of the tiled skeleton alone. */
export interface TiledLayout {
  /** Type of the staged tiles: f16 halves the workgroup memory and the reads; sums stay f32. */
  tileType?: 'f32' | 'f16';
  /** A is [K, M] in memory (its tile is loaded down the rows), and B is [N, K]. */
  transposeA?: boolean;
  transposeB?: boolean;
}

export function tiledProductWgsl(s: ProductShader, layout: TiledLayout = {}): string {
  const T = layout.tileType ?? 'f32';
  const products = s.readB.length;
  const loadsPerThread = (TILE * TILE_K) / (TILE_THREADS * TILE_THREADS);
  // Which tile coordinate varies fastest across threads: the one contiguous in memory.
  const aTileCoord = layout.transposeA ? `let r = e % ${TILE}; let kc = e / ${TILE};` : `let r = e / ${TILE_K}; let kc = e % ${TILE_K};`;
  const bTileCoord = layout.transposeB ? `let kr = e % ${TILE_K}; let cc = e / ${TILE_K};` : `let kr = e / ${TILE}; let cc = e % ${TILE};`;
  const each = (f: (p: number) => string, sep = ' ') => Array.from({ length: products }, (_, p) => f(p)).join(sep);
  const loads: string[] = [];
  for (let i = 0; i < loadsPerThread; i++) {
    const e = `let e = flat + ${i * TILE_THREADS * TILE_THREADS};`;
    loads.push(`{ ${e} ${aTileCoord} let row = row0 + r; let kk = k0 + kc;
      var v = ${T}(0); if (row < u.m && kk < u.k) { v = ${T}(${s.readA}); } As[r][kc] = v; }`);
    loads.push(`{ ${e} ${bTileCoord} let kk = k0 + kr; let col = col0 + cc; let inside = kk < u.k && col < u.n;
      ${each((p) => `var v${p} = ${T}(0); if (inside) { v${p} = ${T}(${s.readB[p]}); } Bs${p}[kr][cc] = v${p};`)} }`);
  }
  const inner: string[] = [];
  for (let j = 0; j < PER_THREAD; j++) inner.push(each((p) => `let b${p}${j} = f32(Bs${p}[kk][tx + ${j * TILE_THREADS}]);`));
  for (let i = 0; i < PER_THREAD; i++) {
    inner.push(`{ let av = f32(As[ty + ${i * TILE_THREADS}][kk]);`);
    for (let j = 0; j < PER_THREAD; j++) {
      const idx = i * PER_THREAD + j;
      inner.push(`  ${each((p) => `acc${p}[${idx}] = fma(av, b${p}${j}, acc${p}[${idx}]);`)}`);
    }
    inner.push('}');
  }
  const stores: string[] = [];
  for (let i = 0; i < PER_THREAD; i++) {
    for (let j = 0; j < PER_THREAD; j++) {
      const sums = Array.from({ length: products }, (_, p) => `acc${p}[${i * PER_THREAD + j}]`);
      stores.push(`{ let r = ty + ${i * TILE_THREADS}; let row = row0 + r; let col = col0 + tx + ${j * TILE_THREADS};
    if (row < u.m && col < u.n) { c[${s.outputIndex}] = ${s.output(sums)}; } }`);
    }
  }
  return `${s.header}
var<workgroup> As : array<array<${T}, ${TILE_K}>, ${TILE}>;
${each((p) => `var<workgroup> Bs${p} : array<array<${T}, ${TILE}>, ${TILE_K}>;`, '\n')}
${s.workgroupMemory ?? ''}

@compute @workgroup_size(${TILE_THREADS}, ${TILE_THREADS}, 1)
fn main(@builtin(local_invocation_id) lid : vec3<u32>, @builtin(workgroup_id) wid : vec3<u32>) {
  let tx = i32(lid.x);
  let ty = i32(lid.y);
  let flat = ty * ${TILE_THREADS} + tx;
  let row0 = i32(wid.y) * ${TILE};
  let col0 = i32(wid.x) * ${TILE};
  ${s.prologue ?? ''}
  ${each((p) => `var acc${p} : array<f32, ${PER_THREAD * PER_THREAD}>;`)}
  for (var k0 = 0; k0 < u.k; k0 += ${TILE_K}) {
    ${loads.join('\n    ')}
    workgroupBarrier();
    ${s.afterStaging ?? ''}
    for (var kk = 0; kk < ${TILE_K}; kk++) {
      ${inner.join('\n      ')}
    }
    workgroupBarrier();
  }
  ${s.beforeStores ?? ''}
  ${stores.join('\n  ')}
}`;
}

/**
 * The skinny skeleton for `rows` rows. In `main`, `t` is the thread, `col` its column of C, `slice` its quarter of K;
 * the shader's statements may use them. With two products, the first's sums meet in workgroup memory before the second's (one
 * reduction array serves both).
 */
export function skinnyProductWgsl(s: ProductShader, rows: number): string {
  const perSlice = SKINNY_K_BLOCK / SKINNY_SLICES;
  const products = s.readB.length;
  const eachRow = (f: (m: number) => string, sep = ' ') => Array.from({ length: rows }, (_, m) => f(m)).join(sep);
  const eachProduct = (f: (p: number) => string, sep = ' ') => Array.from({ length: products }, (_, p) => f(p)).join(sep);
  const reduced = (m: number) => Array.from({ length: SKINNY_SLICES }, (_, q) => `red[${q}][${m}][cl]`).join(' + ');
  // Every product's sums but the last wait in registers of the slice-0 threads while the next is reduced.
  const reductions: string[] = [];
  for (let p = 0; p < products - 1; p++) {
    reductions.push(`${eachRow((m) => `red[slice][${m}][cl] = acc${p}[${m}];`)}
  workgroupBarrier();
  var sum${p} : array<f32, ${rows}>;
  if (slice == 0 && col < u.n) { ${eachRow((m) => `sum${p}[${m}] = ${reduced(m)};`)} }
  workgroupBarrier();`);
  }
  const last = products - 1;
  const outputs = eachRow((m) => {
    const sums = Array.from({ length: products }, (_, p) => (p === last ? `(${reduced(m)})` : `sum${p}[${m}]`));
    return `{ let row = ${m}; let r = ${m}; c[${s.outputIndex}] = ${s.output(sums)}; }`;
  }, '\n    ');
  return `${s.header}
var<workgroup> As : array<array<f32, ${SKINNY_K_BLOCK}>, ${rows}>;
var<workgroup> red : array<array<array<f32, ${SKINNY_COLS}>, ${rows}>, ${SKINNY_SLICES}>;
${s.workgroupMemory ?? ''}

@compute @workgroup_size(${SKINNY_THREADS}, 1, 1)
fn main(@builtin(local_invocation_index) li : u32, @builtin(workgroup_id) wid : vec3<u32>) {
  let t = i32(li);
  let cl = t % ${SKINNY_COLS};
  let slice = t / ${SKINNY_COLS};
  let col = i32(wid.x) * ${SKINNY_COLS} + cl;
  ${s.prologue ?? ''}
  ${eachProduct((p) => `var acc${p} : array<f32, ${rows}>;`)}
  for (var k0 = 0; k0 < u.k; k0 += ${SKINNY_K_BLOCK}) {
    for (var e = t; e < ${rows * SKINNY_K_BLOCK}; e += ${SKINNY_THREADS}) {
      let r = e / ${SKINNY_K_BLOCK};
      let row = r;
      let kk = k0 + e % ${SKINNY_K_BLOCK};
      var value = 0.0;
      if (kk < u.k) { value = f32(${s.readA}); }
      As[r][e % ${SKINNY_K_BLOCK}] = value;
    }
    workgroupBarrier();
    ${s.afterStaging ?? ''}
    if (col < u.n) {
      let kEnd = min(${perSlice}, u.k - k0 - slice * ${perSlice});
      for (var i = 0; i < kEnd; i++) {
        let kl = slice * ${perSlice} + i;
        let kk = k0 + kl;
        ${eachProduct((p) => `let bv${p} = f32(${s.readB[p]});`)}
        ${eachRow((m) => eachProduct((p) => `acc${p}[${m}] = fma(As[${m}][kl], bv${p}, acc${p}[${m}]);`))}
      }
    }
    workgroupBarrier();
  }
  ${s.beforeStores ?? ''}
  ${reductions.join('\n  ')}
  ${eachRow((m) => `red[slice][${m}][cl] = acc${last}[${m}];`)}
  workgroupBarrier();
  if (slice == 0 && col < u.n) {
    ${outputs}
  }
}`;
}
