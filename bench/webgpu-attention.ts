/**
 * Training attention on WebGPU: our fused kernels (worker/webgpu/attention.ts, what causalAttention runs on webgpu)
 * against the composition the webgpu path ran before them (causal-attention.ts batchedAttention: batched Q·Kᵀ, the
 * additive mask uploaded per call, softmax, ·V, and tfjs's own gradients), per shape, forward alone and forward plus
 * backward (dQ, dK, dV of sum(y ⊙ r)). Rows `attention` (causal) and `tree attention`: a GRPO group packed as a tree
 * (the default packing), a prompt of T/4 positions and 8 answers sharing the rest, each position seeing its ancestors.
 *
 * Each figure is the best of REPS timings after a warm-up call (which compiles the shaders), each ended by reading
 * one element of every result (webgpu runs queued work until a read). `--t 256,1024` picks the sequence lengths.
 * On lavapipe (no GPU) the figures are CPU-bound and say little about a GPU; bench/device/ is where a GPU is run.
 */
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../worker/backend.ts';
import { buildPrefixTree, type TreeLayout } from '../worker/prefix-tree.ts';
import { attentionStats, fusedCausalAttention, subtreeEnds } from '../worker/webgpu/attention.ts';
import { type BenchContext, formatTable, type Row } from './report.ts';

/** [query heads, kv heads, head dim]: the bench model's (bench/model.ts) and Qwen2.5-0.5B's. */
const HEADS: [number, number, number][] = [
  [8, 4, 32],
  [14, 2, 64],
];
const LENGTHS = [256, 1024];
const REPS = 3;

export class FusedAttentionNotRunError extends Error {
  override name = 'FusedAttentionNotRunError';
}

/** causal-attention.ts batchedAttention's composition for queryOffset 0, its mask made once as causalMask caches it. */
function composed(q: tf.Tensor3D, k: tf.Tensor3D, v: tf.Tensor3D, mask: Float32Array): tf.Tensor3D {
  const [, rows] = q.shape;
  return tf.matMul(tf.softmax(tf.add(tf.matMul(q, k, false, true), tf.tensor2d(mask, [rows, k.shape[1]]))), v);
}

function causalMask(t: number, rep: number): Float32Array {
  const m = new Float32Array(t * rep * t);
  for (let i = 0; i < t; i++) for (let r = 0; r < rep; r++) m.fill(-1e9, (i * rep + r) * t + i + 1, (i * rep + r + 1) * t);
  return m;
}

/** Answers of the tree row's GRPO group. */
const ANSWERS = 8;

/** A prompt of t/4 positions and ANSWERS answers of an equal share of the rest (t rounded down to fill them). */
function grpoTree(t: number): TreeLayout {
  const prompt = Array.from({ length: Math.floor(t / 4) }, (_, i) => i + 1);
  const answer = Math.floor((t - prompt.length) / ANSWERS);
  const lists = Array.from({ length: ANSWERS }, (_, a) => [...prompt, ...Array.from({ length: answer }, (_, i) => 10_000 * (a + 1) + i)]);
  return buildPrefixTree(lists.map((tokens) => ({ tokens, lossMask: tokens.map(() => 0), advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) })));
}

/** The composition's mask for a tree (as causal-attention.ts treeBlock builds it): 0 where key j is an ancestor. */
function treeMask(layout: TreeLayout, rep: number): Float32Array {
  const ends = subtreeEnds(layout);
  const t = ends.length;
  const m = new Float32Array(t * rep * t).fill(-1e9);
  for (let i = 0; i < t; i++) for (let j = 0; j <= i; j++) if (ends[j] > i) for (let r = 0; r < rep; r++) m[(i * rep + r) * t + j] = 0;
  return m;
}

/**
 * Best wall-clock and CPU milliseconds of `run` over REPS, after a warm-up; every result's first element is read to
 * end a timing. The CPU time is the process's: on lavapipe that includes its shader threads, so it is the work done,
 * which a loaded machine's wall clock is not.
 */
async function bestMs(run: () => tf.Tensor[]): Promise<{ wall: number; cpu: number }> {
  const best = { wall: Infinity, cpu: Infinity };
  for (let i = 0; i <= REPS; i++) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const outs = run();
    await Promise.all(outs.map((o) => tf.slice(o.reshape([-1]), 0, 1).data()));
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    tf.dispose(outs);
    if (i > 0) [best.wall, best.cpu] = [Math.min(best.wall, wall), Math.min(best.cpu, (cpu.user + cpu.system) / 1000)];
  }
  return best;
}

export default async function webgpuAttentionBench(ctx: BenchContext): Promise<Record<string, unknown>> {
  const tArg = ctx.args[ctx.args.indexOf('--t') + 1];
  const lengths = ctx.args.includes('--t') && tArg ? tArg.split(',').map(Number) : LENGTHS;
  const report = await selectBackend('webgpu', { syncReads: false });
  const rows: Row[] = [];
  for (const [heads, kvHeads, hd] of HEADS) {
    const rep = heads / kvHeads;
    for (const length of lengths) {
      for (const layout of [null, grpoTree(length)]) {
        const t = layout ? layout.parent.length : length;
        ctx.log(`${heads}/${kvHeads} heads of ${hd}, T ${t}${layout ? ', tree' : ''}…`);
        const q = tf.mul(tf.randomUniform([kvHeads, t * rep, hd], -1, 1), 1 / Math.sqrt(hd)) as tf.Tensor3D;
        const k = tf.randomUniform([kvHeads, t, hd], -1, 1) as tf.Tensor3D;
        const v = tf.randomUniform([kvHeads, t, hd], -1, 1) as tf.Tensor3D;
        const r = tf.randomUniform(q.shape, -1, 1);
        const mask = layout ? treeMask(layout, rep) : causalMask(t, rep);
        const fused = (a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => fusedCausalAttention(a as tf.Tensor3D, b as tf.Tensor3D, c as tf.Tensor3D, 0, layout);
        const comp = (a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => composed(a as tf.Tensor3D, b as tf.Tensor3D, c as tf.Tensor3D, mask);
        const train = (f: typeof fused) => () => tf.tidy(() => tf.grads((a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(f(a, b, c), r)))([q, k, v]));
        const forward = (f: typeof fused) => () => [tf.tidy(() => f(q, k, v))];
        const before = layout ? attentionStats.treeForward : attentionStats.forward;
        const fusedForwardMs = await bestMs(forward(fused));
        const fusedTrainMs = await bestMs(train(fused));
        if ((layout ? attentionStats.treeForward : attentionStats.forward) === before) throw new FusedAttentionNotRunError('the fused attention kernel did not run');
        const composedForwardMs = await bestMs(forward(comp));
        const composedTrainMs = await bestMs(train(comp));
        // Check the two agree on the forward (the tests hold the tolerances; this catches a broken run).
        const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(fused(q, k, v), comp(q, k, v)))));
        const maxAbsDiff = (await diff.data())[0];
        tf.dispose([q, k, v, r, diff]);
        rows.push({
          row: layout ? 'tree attention' : 'attention',
          heads: `${heads}/${kvHeads}`,
          hd,
          t,
          fused_forward_ms: round(fusedForwardMs.wall),
          composed_forward_ms: round(composedForwardMs.wall),
          forward_speedup: round(composedForwardMs.wall / fusedForwardMs.wall, 2),
          forward_speedup_cpu: round(composedForwardMs.cpu / fusedForwardMs.cpu, 2),
          fused_train_ms: round(fusedTrainMs.wall),
          composed_train_ms: round(composedTrainMs.wall),
          train_speedup: round(composedTrainMs.wall / fusedTrainMs.wall, 2),
          train_speedup_cpu: round(composedTrainMs.cpu / fusedTrainMs.cpu, 2),
          max_abs_diff: Number(maxAbsDiff.toExponential(1)),
        });
      }
    }
  }
  process.stdout.write(formatTable(rows) + '\n');
  return { backend: report.name, reason: report.reason, rows };
}

function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
