/**
 * Where the fused kernels pay, measured: for each fused op (RMSNorm + the q/k/v products; RMSNorm + gate/up +
 * SwiGLU) and each use (a decode step, a prefill's forward, a training forward with its backward, which recomputes
 * what the fused forward did not write), the model's own shapes run fused and unfused, and the faster is chosen
 * (fused-matmul.ts setMeasuredChoice) — the fused only where its result agrees with the unfused one, which the
 * backend's self-check ran (a fused kernel that fails the check is named in the report). Like matmul.ts's calibrateMatmul, no GPU was at hand when the kernels were
 * written, so nothing assumes they win. Once per model shape per thread; with the mode forced it measures nothing.
 */
import * as tf from '@tensorflow/tfjs';
import type { DecoderConfig } from '../common/engine.ts';
import { type FusedMode, fusedKernelsMode, type FusedOp, type FusedUse, FUSED_USES, setFusedKernels, setMeasuredChoice } from './fused-matmul.ts';
import { PendingNorm } from './fused-norm-matmul.ts';
import { gatedUnits, type GatedWeights } from './fused-swiglu-matmul.ts';
import { SKINNY_MAX_ROWS } from './product-wgsl.ts';
import { bestMsPerRun, CALIBRATION_CHECK_TOLERANCE, relativeDeviation } from './gpu.ts';

/** Rows of a decode step as timed: one sequence (the products are bound by reading the weights up to SKINNY_MAX_ROWS). */
const DECODE_ROWS = 1;
/** Rows of a prefill or training micro-batch as timed: enough 64-row tiles to fill a GPU's first wave on small models. */
const BATCH_ROWS = 256;
/** Scale of the random weights: a trained model's order of magnitude, so nothing saturates. */
const WEIGHT_SCALE = 0.02;

/**
 * `run` in `mode`: everything it returns read back as one array (outputs, or in training the gradients), from a first
 * run that compiles the shaders, then its milliseconds per run (gpu.ts bestMsPerRun).
 */
async function timedResult(mode: FusedMode, run: () => tf.Tensor[]): Promise<{ ms: number; result: Float32Array }> {
  setFusedKernels(mode);
  const flat = tf.tidy(() => tf.concat(run().map((t) => tf.reshape(t, [-1]))));
  const result = (await flat.data()) as Float32Array;
  flat.dispose();
  // The last output ends each run's work (the queue runs in order); the rest are released with the tidy.
  return { ms: await bestMsPerRun(() => tf.tidy(() => run().at(-1)!)), result };
}

/** One op's forward as the model runs it, over rows x [N, D] and its norm weight; fused or not as the mode says. */
type Site = (x: tf.Tensor2D, normWeight: tf.Tensor1D) => tf.Tensor[];

/** The model's sites for each op and use: decoding reads the fused qkv and gate/up weights, the rest the separate ones. */
function sites(cfg: DecoderConfig, use: FusedUse): { op: FusedOp; site: Site; weights: tf.Tensor2D[] }[] {
  const { hidden_size: d, num_attention_heads: h, num_key_value_heads: kvh, head_dim: hd, intermediate_size: inter, rms_norm_eps: eps } = cfg;
  const weight = (cols: number) => tf.tidy(() => tf.mul(tf.randomNormal([d, cols]), WEIGHT_SCALE) as tf.Tensor2D);
  const decode = use === 'decode';
  const qkv = decode ? [weight((h + 2 * kvh) * hd)] : [weight(h * hd), weight(kvh * hd), weight(kvh * hd)];
  const gateUp = decode ? [weight(2 * inter)] : [weight(inter), weight(inter)];
  const gated = (): GatedWeights => (decode ? { gateUp: gateUp[0] } : { gate: gateUp[0], up: gateUp[1] });
  return [
    {
      op: 'normMatmul',
      weights: qkv,
      site: (x, nw) => {
        const input = new PendingNorm(x, nw, eps);
        return qkv.map((w) => input.project(w, (a, b) => tf.matMul(a, b)));
      },
    },
    {
      op: 'swigluMatmul',
      weights: gateUp,
      site: (x, nw) => [gatedUnits(new PendingNorm(x, nw, eps), gated(), (a, b) => tf.matMul(a, b))],
    },
  ];
}

const calibrations = new Map<string, string>();

/**
 * Under 'auto', time each fused op against its unfused composition on `cfg`'s shapes on the active webgpu backend,
 * per use, and choose the faster. Returns what it found, for the backend's report.
 */
export async function calibrateFusedKernels(cfg: DecoderConfig): Promise<string> {
  const mode = fusedKernelsMode();
  if (mode !== 'auto') return `fused: ${mode} (chosen, not measured)`;
  const key = [cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.intermediate_size].join(',');
  const known = calibrations.get(key);
  if (known) return known;
  const found: Record<FusedOp, string[]> = { normMatmul: [], swigluMatmul: [] };
  try {
    for (const use of FUSED_USES) {
      const rows = use === 'decode' ? Math.min(DECODE_ROWS, SKINNY_MAX_ROWS) : BATCH_ROWS;
      const x = tf.randomNormal([rows, cfg.hidden_size]) as tf.Tensor2D;
      const nw = tf.tidy(() => tf.add(1, tf.mul(tf.randomNormal([cfg.hidden_size]), 0.1)) as tf.Tensor1D);
      for (const { op, site, weights } of sites(cfg, use)) {
        const run = (): tf.Tensor[] => {
          if (use !== 'train') return site(x, nw);
          // The weights' gradients too: the closure's weights are the tensors differentiated.
          return tf.grads((...xs: tf.Tensor[]) => tf.addN(site(xs[0] as tf.Tensor2D, xs[1] as tf.Tensor1D).map((y) => tf.sum(y))))([x, nw, ...weights]);
        };
        const fused = await timedResult('on', run);
        const unfused = await timedResult('off', run);
        const [fusedMs, unfusedMs] = [fused.ms, unfused.ms];
        // Checked before it can be chosen: the fused result (outputs, and gradients in training) against the unfused.
        const deviation = relativeDeviation(fused.result, unfused.result);
        const agrees = deviation <= CALIBRATION_CHECK_TOLERANCE;
        setMeasuredChoice(op, use, agrees && fusedMs < unfusedMs);
        const why = agrees ? '' : `, fused failed its check: off by ${deviation.toExponential(1)}`;
        found[op].push(`${use} ${agrees && fusedMs < unfusedMs ? 'fused' : 'unfused'} (${fusedMs.toFixed(2)} vs ${unfusedMs.toFixed(2)} ms${why})`);
        tf.dispose(weights);
      }
      tf.dispose([x, nw]);
    }
  } finally {
    setFusedKernels('auto');
  }
  const report = `fused norm·matmul: ${found.normMatmul.join(', ')}; swiglu·matmul: ${found.swigluMatmul.join(', ')}`;
  calibrations.set(key, report);
  return report;
}
