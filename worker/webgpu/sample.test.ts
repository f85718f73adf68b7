/**
 * Device sampling (sample.ts) against the host sampler through Dawn (testing/sample-checks.ts): greedy, temperature,
 * top-k, top-p and both, ties, vocabularies below and above the workgroup size, with the kernel's reductions in
 * workgroup memory and in subgroups (where the device has them); the kernel refuses what it cannot take by name. Skips only without an adapter.
 */
import { describe, expect, it } from 'vitest';
import * as tf from '@tensorflow/tfjs';
import { selectBackend } from '../backend.ts';
import { webgpuFeatures } from './device.ts';
import { SAMPLE_KERNEL, SampleShapeError, sampleOnDevice, sampleStats, setSampleReduction } from './sample.ts';
import { kernelsRun, webgpuSkipReason } from './testing/gpu.ts';
import { SAMPLE_CASES, sampleCaseChecks, sampleCaseName, sampleSeed } from './testing/sample-checks.ts';

const skipReason = await webgpuSkipReason();

describe.skipIf(skipReason !== null)(
  `device sampling on WebGPU${skipReason ? ` (skipped: ${skipReason})` : ''}`,
  () => {
    it('selects webgpu', async () => {
      expect((await selectBackend('webgpu', { syncReads: false })).name).toBe('webgpu');
    });

    for (const reduction of ['workgroup', 'subgroups'] as const) {
      SAMPLE_CASES.forEach((c, i) => {
        it(`picks the host sampler's tokens and logprobs (${reduction}): ${sampleCaseName(c)}`, async () => {
          setSampleReduction(reduction);
          const before = tf.memory().numTensors;
          const sg = sampleStats.subgroupDispatches;
          try {
            for (const check of await sampleCaseChecks(c, sampleSeed(i)))
              expect(check.ratio, check.name).toBeLessThanOrEqual(1);
          } finally {
            setSampleReduction('subgroups');
          }
          expect(tf.memory().numTensors).toBe(before);
          // Subgroups only where asked for and the device has them (then every batch).
          const wanted = reduction === 'subgroups' && webgpuFeatures()?.subgroups;
          expect(sampleStats.subgroupDispatches - sg > 0).toBe(wanted);
        });
      });
    }

    it('runs as one kernel', async () => {
      const names = await kernelsRun([{ data: new Float32Array([0, 1, 2, 3]), shape: [2, 2] }], (x) =>
        sampleOnDevice(
          x as tf.Tensor2D,
          [0, 1].map(() => ({ invTemperature: 1, topK: 0, topP: 1, draw: 0.5 })),
        ),
      );
      expect(names.filter((n) => n === SAMPLE_KERNEL)).toHaveLength(1);
    });

    it('refuses a row count other than the logits by name', () => {
      const logits = tf.zeros([2, 3]) as tf.Tensor2D;
      expect(() => sampleOnDevice(logits, [{ invTemperature: 0, topK: 0, topP: 1, draw: 0 }])).toThrow(
        SampleShapeError,
      );
      logits.dispose();
    });
  },
);
