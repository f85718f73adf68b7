/**
 * Token sampling on the device: one workgroup per row of logits picks the row's token (greedy, or temperature with
 * top-k / top-p) and its logprob, so that a decode step reads back two floats per sequence instead of its logits
 * [n, V] (600 KB per sequence for a 150k vocabulary).
 *
 * Same semantics as worker/sampler.ts sampleToken, which the tests compare against:
 * - logprob = log_softmax(logits / T) over the whole vocabulary (T = 1 for greedy), truncation not reflected;
 * - greedy: the first index of the largest logit;
 * - no truncation: the first token, in id order, whose cumulative probability reaches the draw;
 * - top-k / top-p: tokens ordered best first (ties in id order); keep the first k, or fewer where the cumulative
 *   probability (not renormalised by top-k) reaches top-p first, at least one; pick the first kept token whose
 *   cumulative probability reaches draw × the kept mass (the last kept one if rounding leaves it short).
 * The draw is the host's: the caller draws it from the request's seeded PRNG exactly when sampleToken would (once
 * per non-greedy token), so a request's stream of draws is the same on either path. Sums are f32 here and f64 on
 * the host, so a draw within rounding of a boundary between two tokens may pick the other one.
 *
 * Nothing is sorted. Logits map to u32 keys that order as the floats do; "the k-th best key" and "the key where the
 * cumulative probability in best-first order reaches τ" are each found a digit of RADIX_BITS at a time, one pass over
 * the row per digit counting (and summing the probability of) the tokens above the digits fixed so far and those
 * within them per value of the next digit; within the tie group found, the wanted token is the j-th of that key in
 * id order (a scan of per-thread counts over contiguous chunks). Loops are bounded by uniforms, not constants
 * (constant-bound loops took minutes to compile on lavapipe). Greedy takes two passes over the row, sampling without
 * a cut four, with top-k or top-p 28 to 41 (lavapipe, 8 rows of 32k, top-k 50 and top-p 0.9: about half the
 * time of a bisection a bit per pass). Each pass's reductions run in subgroups where the device has them (see wgsl),
 * in a workgroup-memory tree elsewhere; both are tested.
 */
import * as tf from '@tensorflow/tfjs';
import { featuresOf } from './device.ts';
import { asWebGpu, dispatch, GRID_BUILTINS, gridFor, ourKernelRuns, WebGpuKernelError } from './gpu.ts';

export const SAMPLE_KERNEL = 'AgentJetSample';

/** Threads per row: a power of two (tree reductions halve it). */
const SAMPLE_WORKGROUP = 128;
/** Bits of a key. */
const KEY_BITS = 32;
/**
 * Bits of a key a search fixes per pass over the row (11 passes for 32 bits instead of a bisection's 32). Each
 * thread keeps a count and a probability per digit value in workgroup memory: 2 · 2³ · 128 · 4 B = 8 KiB, within
 * WORKGROUP_FLOATS beside the reduction arrays.
 */
const RADIX_BITS = 3;
const RADIX_BINS = 2 ** RADIX_BITS;
/** Floats per row of the parameters tensor: 1/T (0 = greedy), top-k (0 = none), top-p, draw. */
export const SAMPLE_PARAMS = 4;
/** Ids travel as f32 in the output; exact below 2²⁴. */
const MAX_SAMPLE_VOCAB = 2 ** 24;

/**
 * Dispatches and rows sampled since the thread started (tests check that decoding sampled here), and the dispatches
 * that reduced with subgroups.
 */
export const sampleStats = { dispatches: 0, rows: 0, subgroupDispatches: 0 };

export class SampleShapeError extends Error {
  override name = 'SampleShapeError';
}

/** One row's sampling as the kernel takes it. */
export interface DeviceSampling {
  /** 1/temperature; 0 for greedy. */
  invTemperature: number;
  /** 0 for no top-k cut. */
  topK: number;
  topP: number;
  /** The row's uniform draw in [0, 1) (unused when greedy). */
  draw: number;
}

/** Largest finite f32: an 1/T beyond it (a denormal temperature) would be +inf in the shader and make z NaN. */
const F32_MAX = 3.4028234663852886e38;

/** The parameters tensor's data, [n, SAMPLE_PARAMS]. */
export function sampleParams(rows: DeviceSampling[]): Float32Array {
  const out = new Float32Array(rows.length * SAMPLE_PARAMS);
  rows.forEach((r, i) =>
    out.set([Math.min(r.invTemperature, F32_MAX), r.topK, r.topP, r.draw], i * SAMPLE_PARAMS),
  );
  return out;
}

export type SampleReduction = 'subgroups' | 'workgroup';

let preferred: SampleReduction = 'subgroups';

/** Prefer subgroup or workgroup-memory reductions ('subgroups' runs only where the device has them). */
export function setSampleReduction(r: SampleReduction): void {
  preferred = r;
}

const WG = SAMPLE_WORKGROUP;

/**
 * Where `subgroups`, the per-row reductions (the largest logit and its index, the sums, and each search pass's
 * per-digit counts and masses) reduce within each subgroup (subgroupAdd, subgroupMax, subgroupMin), then one partial
 * per subgroup meets in workgroup memory, which thread 0 adds up: one barrier a reduction instead of a tree's
 * log₂ WG, and a search pass's per-digit counts stay in each thread's registers. Nothing assumes a subgroup size:
 * partials are indexed by subgroup_id, counted by num_subgroups, and written by each subgroup's first active lane.
 * The prefix scans over id-ordered chunks stay in workgroup memory (a subgroup's lane order need not be the
 * threads' order). Sums are then added in another order than the tree's (f32 rounding only).
 */
function wgsl(subgroups: boolean): string {
  const SG = subgroups;
  return `${SG ? 'enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n' : ''}struct U { rows : i32, v : i32, bits : i32, bins : i32, };
@group(0) @binding(0) var<storage, read_write> y : array<f32>;
@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(2) var<storage, read> prm : array<f32>;
@group(0) @binding(3) var<uniform> u : U;
var<workgroup> redF : array<f32, ${WG}>;
var<workgroup> redU : array<u32, ${WG}>;
var<workgroup> binU : array<u32, ${RADIX_BINS * WG}>;
var<workgroup> binF : array<f32, ${RADIX_BINS * WG}>;
var<workgroup> oneF : f32;
var<workgroup> oneU : u32;
var<private> base : u32;
var<private> nv : u32;
var<private> mx : f32;
var<private> invT : f32;
var<private> lse : f32;
// The probability above the key rankOfMass last found.
var<private> lastMassAbove : f32;
${SG ? `// This invocation's subgroup, their number, and whether it is its subgroup's first active lane.
var<private> sgId : u32;
var<private> sgCount : u32;
var<private> sgFirst : bool;` : ''}

// Orders as the floats do (−0 taken as +0, as the host compares them equal).
fn keyOf(v : f32) -> u32 {
  let b = select(bitcast<u32>(v), 0u, v == 0.0);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
fn valueOf(k : u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}
fn zOf(v : f32) -> f32 { return (v - mx) * invT; }
fn probOf(v : f32) -> f32 { return exp(zOf(v) - lse); }

// v from thread 0 to all, uniform (the uniformity analysis takes values computed from private variables as not).
fn uniformF(t : u32, v : f32) -> f32 {
  if (t == 0u) { oneF = v; }
  return workgroupUniformLoad(&oneF);
}
fn uniformU(t : u32, v : u32) -> u32 {
  if (t == 0u) { oneU = v; }
  return workgroupUniformLoad(&oneU);
}

// Workgroup sums of (c, m), left in oneU and oneF (read them with workgroupUniformLoad).
fn reduceCM(t : u32, c : u32, m : f32) {
${
  SG
    ? `  let sc = subgroupAdd(c);
  let sm = subgroupAdd(m);
  if (sgFirst) { redU[sgId] = sc; redF[sgId] = sm; }
  workgroupBarrier();
  if (t == 0u) {
    var tc = 0u;
    var tm = 0.0;
    for (var s = 0u; s < sgCount; s++) { tc += redU[s]; tm += redF[s]; }
    oneU = tc;
    oneF = tm;
  }`
    : `  redU[t] = c;
  redF[t] = m;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (t < s) { redU[t] += redU[t + s]; redF[t] += redF[t + s]; }
    workgroupBarrier();
  }
  if (t == 0u) { oneU = redU[0]; oneF = redF[0]; }`
}
}

// How many tokens have a key ≥ k, and their probability; the result in oneU, oneF.
fn atOrAbove(t : u32, k : u32) {
  var c = 0u;
  var m = 0.0;
  for (var i = t; i < nv; i += ${WG}u) {
    let v = x[base + i];
    if (keyOf(v) >= k) { c += 1u; m += probOf(v); }
  }
  reduceCM(t, c, m);
}

// The largest key k whose keys ≥ k number at least c and hold at least tau: a digit of RADIX_BITS per pass, each
// pass counting the tokens above the digits fixed so far and, per value of the next digit, those within them.
fn keyWhere(t : u32, c : u32, tau : f32) -> u32 {
  var res = 0u;
  var hi = u.bits;
  loop {
    if (hi <= 0) { break; }
    let shift = u32(max(hi - ${RADIX_BITS}, 0));
    let top = u32(hi);
    let width = top - shift;
    ${SG ? `// Initialised explicitly: without an initialiser, lavapipe kept the last pass's counts (seen with Dawn 0.6.2).
    var cb = array<u32, ${RADIX_BINS}>();
    var mb = array<f32, ${RADIX_BINS}>();` : `for (var b = 0; b < u.bins; b++) { binU[u32(b) * ${WG}u + t] = 0u; binF[u32(b) * ${WG}u + t] = 0.0; }`}
    var cA = 0u;
    var mA = 0.0;
    for (var i = t; i < nv; i += ${WG}u) {
      let v = x[base + i];
      let k = keyOf(v);
      var above = false;
      var same = true;
      if (top < 32u) { above = (k >> top) > (res >> top); same = (k >> top) == (res >> top); }
      if (above) {
        cA += 1u;
        mA += probOf(v);
      } else if (same) {
        ${SG ? `let d = (k >> shift) & ((1u << width) - 1u);
        cb[d] += 1u;
        mb[d] += probOf(v);` : `let d = ((k >> shift) & ((1u << width) - 1u)) * ${WG}u + t;
        binU[d] += 1u;
        binF[d] += probOf(v);`}
      }
    }
${
  SG
    ? `    let sc = subgroupAdd(cA);
    let sm = subgroupAdd(mA);
    if (sgFirst) { redU[sgId] = sc; redF[sgId] = sm; }
    for (var b = 0; b < u.bins; b++) {
      let bc = subgroupAdd(cb[b]);
      let bm = subgroupAdd(mb[b]);
      if (sgFirst) { binU[u32(b) * ${WG}u + sgId] = bc; binF[u32(b) * ${WG}u + sgId] = bm; }
    }
    workgroupBarrier();
    if (t == 0u) {
      var cnt = 0u;
      var m = 0.0;
      for (var s = 0u; s < sgCount; s++) { cnt += redU[s]; m += redF[s]; }
      var pick = 0u;
      for (var d = i32((1u << width) - 1u); d >= 1; d--) {
        for (var s = 0u; s < sgCount; s++) { cnt += binU[u32(d) * ${WG}u + s]; m += binF[u32(d) * ${WG}u + s]; }
        if (cnt >= c && m >= tau) { pick = u32(d); break; }
      }
      oneU = res | (pick << shift);
    }`
    : `    redU[t] = cA;
    redF[t] = mA;
    workgroupBarrier();
    for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
      if (t < s) {
        redU[t] += redU[t + s];
        redF[t] += redF[t + s];
        for (var b = 0; b < u.bins; b++) {
          let d = u32(b) * ${WG}u + t;
          binU[d] += binU[d + s];
          binF[d] += binF[d + s];
        }
      }
      workgroupBarrier();
    }
    if (t == 0u) {
      var cnt = redU[0];
      var m = redF[0];
      var pick = 0u;
      for (var d = i32((1u << width) - 1u); d >= 1; d--) {
        cnt += binU[u32(d) * ${WG}u];
        m += binF[u32(d) * ${WG}u];
        if (cnt >= c && m >= tau) { pick = u32(d); break; }
      }
      oneU = res | (pick << shift);
    }`
}
    res = workgroupUniformLoad(&oneU);
    hi = i32(shift);
  }
  return res;
}

// The key of the c-th best token (c ≥ 1): the largest k with at least c keys ≥ k.
fn keyOfRank(t : u32, c : u32) -> u32 { return keyWhere(t, c, 0.0); }

// The key at which the cumulative probability, best first, reaches tau: the largest k whose keys ≥ k hold a token
// and at least tau.
fn keyOfMass(t : u32, tau : f32) -> u32 { return keyWhere(t, 1u, tau); }

// Position (1-based, best first) where the cumulative probability reaches tau, as (key, tokens above it, rank
// within its tie group).
fn rankOfMass(t : u32, tau : f32) -> vec3<u32> {
  let k = keyOfMass(t, tau);
  atOrAbove(t, k);
  let cAt = workgroupUniformLoad(&oneU);
  var cAbove = 0u;
  var mAbove = 0.0;
  if (k != 0xffffffffu) {
    atOrAbove(t, k + 1u);
    cAbove = workgroupUniformLoad(&oneU);
    mAbove = workgroupUniformLoad(&oneF);
  }
  lastMassAbove = mAbove;
  let p = probOf(valueOf(k));
  var j = 1u;
  if (p > 0.0) { j = u32(max(1.0, ceil((tau - mAbove) / p))); }
  return vec3<u32>(k, cAbove, uniformU(t, min(j, max(cAt - cAbove, 1u))));
}

fn emit(row : u32, id : u32) {
  y[row * 2u] = f32(id);
  y[row * 2u + 1u] = zOf(x[base + id]) - lse;
}

@compute @workgroup_size(${WG}, 1, 1)
fn main(${GRID_BUILTINS}${SG ? ', @builtin(subgroup_id) sgIn : u32, @builtin(num_subgroups) nsgIn : u32' : ''}) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= u32(u.rows)) { return; }
  let t = li;
${SG ? `  sgId = sgIn;
  sgCount = nsgIn;
  sgFirst = subgroupExclusiveAdd(1u) == 0u;` : ''}
  let vocab = u32(u.v);
  nv = vocab;
  base = row * vocab;
  if (t == 0u) { oneF = prm[row * 4u]; }
  let invT0 = workgroupUniformLoad(&oneF);
  if (t == 0u) { oneF = prm[row * 4u + 1u]; }
  let topK = u32(workgroupUniformLoad(&oneF));
  if (t == 0u) { oneF = prm[row * 4u + 2u]; }
  let topP = workgroupUniformLoad(&oneF);
  if (t == 0u) { oneF = prm[row * 4u + 3u]; }
  let draw = workgroupUniformLoad(&oneF);
  let greedy = invT0 <= 0.0;
  invT = select(invT0, 1.0, greedy);

  // The largest logit and its first index (the host's greedy pick; index 0 when no logit exceeds −f32max).
  var m = -0x1.fffffep+127f;
  var arg = 0xffffffffu;
  for (var i = t; i < nv; i += ${WG}u) {
    let v = x[base + i];
    if (v > m) { m = v; arg = i; }
  }
${
  SG
    ? `  // The subgroup's largest value, then the least index among the lanes that hold it (first index, as the tree).
  let sgMax = subgroupMax(m);
  let sgArg = subgroupMin(select(0xffffffffu, arg, m == sgMax));
  if (sgFirst) { redF[sgId] = sgMax; redU[sgId] = sgArg; }
  workgroupBarrier();
  if (t == 0u) {
    var bm = redF[0];
    var ba = redU[0];
    for (var s = 1u; s < sgCount; s++) {
      let om = redF[s];
      let oa = redU[s];
      if (om > bm || (om == bm && oa < ba)) { bm = om; ba = oa; }
    }
    oneF = bm;
    oneU = ba;
  }`
    : `  redF[t] = m;
  redU[t] = arg;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (t < s) {
      let om = redF[t + s];
      let oa = redU[t + s];
      if (om > redF[t] || (om == redF[t] && oa < redU[t])) { redF[t] = om; redU[t] = oa; }
    }
    workgroupBarrier();
  }
  if (t == 0u) { oneF = redF[0]; oneU = redU[0]; }`
}
  mx = workgroupUniformLoad(&oneF);
  var best = workgroupUniformLoad(&oneU);
  if (best == 0xffffffffu) { best = 0u; }

  var sum = 0.0;
  for (var i = t; i < nv; i += ${WG}u) { sum += exp(zOf(x[base + i])); }
  reduceCM(t, 0u, sum);
  lse = log(workgroupUniformLoad(&oneF));

  if (greedy) {
    if (t == 0u) { emit(row, best); }
    return;
  }

  let chunk = (nv + ${WG - 1}u) / ${WG}u;
  let lo = min(t * chunk, nv);
  let hi = min(lo + chunk, nv);
  let cut = (topK > 0u && topK < vocab) || topP < 1.0;
  if (!cut) {
    // Walk in id order: each thread sums its chunk, a scan finds the chunk where the draw is reached, it walks.
    var p = 0.0;
    for (var i = lo; i < hi; i++) { p += probOf(x[base + i]); }
    redF[t] = p;
    workgroupBarrier();
    for (var off = 1u; off < ${WG}u; off <<= 1u) {
      var add = 0.0;
      if (t >= off) { add = redF[t - off]; }
      workgroupBarrier();
      redF[t] += add;
      workgroupBarrier();
    }
    let incl = redF[t];
    var excl = 0.0;
    if (t > 0u) { excl = redF[t - 1u]; }
    if (incl >= draw && (t == 0u || excl < draw)) {
      var acc = excl;
      var id = max(hi, 1u) - 1u;
      for (var i = lo; i < hi; i++) {
        acc += probOf(x[base + i]);
        if (acc >= draw) { id = i; break; }
      }
      emit(row, id);
    }
    if (t == ${WG - 1}u && incl < draw) { emit(row, nv - 1u); } // rounding left the total short: the host's last token
    return;
  }

  var keep = select(vocab, topK, topK > 0u && topK < vocab);
  // The keep-th token's key, the tokens above it and their mass: found by the top-p search where it sets keep, else
  // by a search of its own.
  var kKeep = 0u;
  var cAboveKeep = 0u;
  var mAboveKeep = 0.0;
  var found = false;
  if (topP < 1.0) {
    let r = rankOfMass(t, topP);
    if (r.y + r.z <= keep) {
      keep = r.y + r.z;
      kKeep = r.x;
      cAboveKeep = r.y;
      mAboveKeep = lastMassAbove;
      found = true;
    }
  }
  keep = max(keep, 1u);
  if (!found) {
    kKeep = keyOfRank(t, keep);
    if (kKeep != 0xffffffffu) {
      atOrAbove(t, kKeep + 1u);
      cAboveKeep = workgroupUniformLoad(&oneU);
      mAboveKeep = workgroupUniformLoad(&oneF);
    }
  }
  // The kept tokens' mass: those above the keep-th token's key, and as many of its tie group as fit.
  let total = mAboveKeep + f32(keep - cAboveKeep) * probOf(valueOf(kKeep));
  var r = rankOfMass(t, uniformF(t, draw * total));
  if (r.y + r.z > keep) { r = vec3<u32>(kKeep, cAboveKeep, keep - cAboveKeep); } // past the kept ones: the last kept

  // The r.z-th token (id order) whose key is r.x.
  var c = 0u;
  for (var i = lo; i < hi; i++) { if (keyOf(x[base + i]) == r.x) { c += 1u; } }
  redU[t] = c;
  workgroupBarrier();
  for (var off = 1u; off < ${WG}u; off <<= 1u) {
    var add = 0u;
    if (t >= off) { add = redU[t - off]; }
    workgroupBarrier();
    redU[t] += add;
    workgroupBarrier();
  }
  let incl = redU[t];
  let excl = incl - c;
  if (excl < r.z && r.z <= incl) {
    var n = excl;
    for (var i = lo; i < hi; i++) {
      if (keyOf(x[base + i]) == r.x) {
        n += 1u;
        if (n == r.z) { emit(row, i); break; }
      }
    }
  }
}`;
}

/** Register the webgpu kernel: inputs {logits [n, V], params [n, SAMPLE_PARAMS]} → [n, 2] (id, logprob). */
export function registerSample(): void {
  tf.registerKernel({
    kernelName: SAMPLE_KERNEL,
    backendName: 'webgpu',
    kernelFunc: ({ inputs, backend }) => {
      const logits = inputs.logits as tf.TensorInfo;
      const [n, v] = logits.shape;
      const gpu = asWebGpu(backend);
      const subgroups = preferred === 'subgroups' && featuresOf(gpu.device).subgroups;
      const out = dispatch(gpu, {
        key: `sample-${subgroups ? 'sg' : 'wg'}`,
        wgsl: () => wgsl(subgroups),
        name: 'Sample',
        inputs: [logits, inputs.params as tf.TensorInfo],
        output: { shape: [n, 2] },
        uniforms: [{ i32: n }, { i32: v }, { i32: KEY_BITS }, { i32: RADIX_BINS }],
        workgroups: gridFor(n),
      });
      sampleStats.dispatches++;
      if (subgroups) sampleStats.subgroupDispatches++;
      sampleStats.rows += n;
      return out;
    },
  });
}

/** Whether sampleOnDevice runs here (webgpu with the kernel registered). */
export function deviceSamplingRuns(): boolean {
  return ourKernelRuns(SAMPLE_KERNEL);
}

/** Each row's token and logprob, [n, 2], from logits [n, V] (float32) and `rows` (one per row). Webgpu only. */
export function sampleOnDevice(logits: tf.Tensor2D, rows: DeviceSampling[]): tf.Tensor2D {
  if (!deviceSamplingRuns())
    throw new WebGpuKernelError('device sampling needs the webgpu backend with our kernels');
  const [n, v] = logits.shape;
  if (logits.dtype !== 'float32' || rows.length !== n || v < 1 || v >= MAX_SAMPLE_VOCAB) {
    throw new SampleShapeError(
      `want float32 logits [n, 1 ≤ V < ${MAX_SAMPLE_VOCAB}] and n sampling rows; got ${logits.dtype} [${logits.shape}] and ${rows.length}`,
    );
  }
  return tf.tidy(() => {
    const params = tf.tensor2d(sampleParams(rows), [n, SAMPLE_PARAMS]);
    return tf.engine().runKernel(SAMPLE_KERNEL, { logits, params }) as tf.Tensor2D;
  });
}

/** Read sampleOnDevice's [n, 2] back (the step's one small read) and release it. */
export async function readSamples(picked: tf.Tensor2D): Promise<{ id: number; logprob: number }[]> {
  const data = (await picked.data()) as Float32Array;
  picked.dispose();
  return Array.from({ length: data.length / 2 }, (_, i) => ({ id: data[2 * i], logprob: data[2 * i + 1] }));
}
