/**
 * Device sampling (sample.ts) against the host sampler (worker/sampler.ts sampleToken) on the same logits and the
 * same draw: each batch mixes every mode in its rows (greedy, temperature alone, top-k, top-p, both, k = 1, k ≥ V),
 * over vocabularies smaller and larger than the workgroup, with logits rounded to coarse steps so that ties (which
 * the host orders by id) are common, and with banned (−∞) logits that a top-k cut reaches into. The token must be the host's; where it is not, the draw must lie within
 * rounding (f32 sums here, f64 there) of a boundary between the two tokens, which the check confirms by moving the
 * draw by BOUNDARY_DRAW either way on the host. Logprobs within LOGPROB_TOL.
 *
 * Run with webgpu selected (selectBackend('webgpu', { syncReads: false })).
 */
import * as tf from '@tensorflow/tfjs';
import type { SamplingParams } from '../../common/engine.ts';
import { seededRandom } from '../../model.ts';
import { sampleToken } from '../../sampler.ts';
import { sampling } from '../../testing/configs.ts';
import { readSamples, type SampleReduction, sampleOnDevice, setSampleReduction } from '../sample.ts';
import type { Check } from './checks.ts';
import { randomArray } from './gpu.ts';

/** f32 log-sum-exp over ≤ 1000 logits of magnitude ≤ 12 against the host's f64: a few ulps of the largest z. */
export const LOGPROB_TOL = { atol: 1e-5, rtol: 1e-5 };
/** How far the draw may sit from a boundary for a different token to count as rounding (f32 sums of ≤ 1000 terms). */
const BOUNDARY_DRAW = 1e-5;

/** Every mode, one per row of a batch. */
const MODES: Partial<SamplingParams>[] = [
  { temperature: 0 },
  { temperature: 1 },
  { temperature: 0.7, topK: 5 },
  { temperature: 1, topP: 0.9 },
  { temperature: 1.3, topK: 20, topP: 0.8 },
  { temperature: 1, topK: 1 },
  { temperature: 0.5, topP: 0.3 },
  { temperature: 2, topK: 100_000 }, // k ≥ V: no cut
  { temperature: 1, topK: 150 }, // past the finite logits of the masked case
];

export interface SampleCase {
  vocab: number;
  /** Logits uniform in ±scale… */
  scale: number;
  /** …rounded to multiples of this (0: not rounded)… */
  step: number;
  /** …and every masked-th one −∞ (a banned token; 0: none). */
  masked: number;
}

export const SAMPLE_CASES: SampleCase[] = [
  { vocab: 1, scale: 1, step: 0, masked: 0 },
  { vocab: 5, scale: 3, step: 1, masked: 0 },
  { vocab: 300, scale: 4, step: 0.5, masked: 0 },
  { vocab: 1000, scale: 12, step: 0, masked: 0 },
  { vocab: 200, scale: 2, step: 0, masked: 3 }, // 67 of 200 banned: top-k 150 reaches into them
];

/** Batches (draws and logits) per case. */
const SAMPLE_BATCHES = 3;

export const sampleCaseName = (c: SampleCase) =>
  `sample V ${c.vocab} logits ±${c.scale}${c.step ? ` in steps of ${c.step}` : ''}${c.masked ? `, every ${c.masked}th −∞` : ''}`;

const paramsOf = (mode: Partial<SamplingParams>): SamplingParams => sampling({ maxTokens: 1, ...mode });

/** The batches of a case on webgpu: per row, 0 when the host picks the same token, 0.5 at a rounding boundary, else Infinity; and logprob ratios. */
export async function sampleCaseChecks(c: SampleCase, seed: number): Promise<Check[]> {
  const n = MODES.length;
  let idWorst = 0;
  let lpWorst = 0;
  let boundaries = 0;
  for (let batch = 0; batch < SAMPLE_BATCHES; batch++) {
    const logits = randomArray(n * c.vocab, seed + batch, c.scale).map((x, i) =>
      c.masked && (i % c.vocab) % c.masked === 0 ? -Infinity : c.step ? Math.round(x / c.step) * c.step : x,
    );
    const rand = seededRandom(seed + 1000 * batch);
    const draws = MODES.map(() => rand());
    const rows = MODES.map((m, i) => ({
      invTemperature: m.temperature ? 1 / m.temperature : 0,
      topK: m.topK ?? 0,
      topP: m.topP ?? 1,
      draw: draws[i],
    }));
    const input = tf.tensor2d(logits, [n, c.vocab]);
    const got = await readSamples(sampleOnDevice(input, rows));
    input.dispose();
    MODES.forEach((mode, i) => {
      const row = logits.subarray(i * c.vocab, (i + 1) * c.vocab);
      const host = (draw: number) => sampleToken(row, paramsOf(mode), () => draw);
      const want = host(draws[i]);
      let idRatio = 0;
      if (got[i].id !== want.id) {
        const near = [
          host(Math.max(0, draws[i] - BOUNDARY_DRAW)),
          host(Math.min(1 - Number.EPSILON, draws[i] + BOUNDARY_DRAW)),
        ].some((t) => t.id === got[i].id);
        idRatio = near ? 0.5 : Infinity;
        if (near) boundaries++;
      }
      idWorst = Math.max(idWorst, idRatio);
      // Logprob of the token the device picked, as the host computes it (one pass over the whole row).
      const hostLogprob =
        got[i].id === want.id ? want.logprob : logprobOf(row, mode.temperature ?? 0, got[i].id);
      const r =
        Math.abs(got[i].logprob - hostLogprob) /
        (LOGPROB_TOL.atol + LOGPROB_TOL.rtol * Math.abs(hostLogprob));
      lpWorst = Math.max(lpWorst, Number.isNaN(r) ? Infinity : r);
    });
  }
  const name = sampleCaseName(c);
  return [
    {
      name: `${name}: the host's tokens (${boundaries} of ${SAMPLE_BATCHES * n} at a rounding boundary)`,
      ratio: idWorst,
    },
    { name: `${name}: logprobs`, ratio: lpWorst },
  ];
}

/** log_softmax(row / T)[id] in f64, T = 1 for greedy (sampler.ts's logprob). */
function logprobOf(row: Float32Array, temperature: number, id: number): number {
  if (!Number.isInteger(id) || id < 0 || id >= row.length) return NaN;
  const invT = temperature > 0 ? 1 / temperature : 1;
  const max = row.reduce((a, b) => Math.max(a, b), -Infinity);
  let sum = 0;
  for (const x of row) sum += Math.exp((x - max) * invT);
  return (row[id] - max) * invT - Math.log(sum);
}

export const sampleSeed = (index: number) => 7 * index + 3;

/** Every case with the kernel's reductions in workgroup memory or (where the device has them) subgroups. */
export async function sampleChecks(reduction: SampleReduction = 'subgroups'): Promise<Check[]> {
  setSampleReduction(reduction);
  const out: Check[] = [];
  try {
    for (const [i, c] of SAMPLE_CASES.entries()) {
      for (const check of await sampleCaseChecks(c, sampleSeed(i))) out.push({ ...check, name: `${check.name} (${reduction})` });
    }
  } finally {
    setSampleReduction('subgroups');
  }
  return out;
}
