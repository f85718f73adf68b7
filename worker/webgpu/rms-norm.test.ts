/**
 * Our RMSNorm kernel against worker/model.ts's rmsNorm on the cpu backend (cases in testing/checks.ts): odd widths,
 * rows past one grid dimension, both reductions (subgroups where the device has them, workgroup memory), and the
 * gradient for x and w. Skips only without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { selectBackend } from '../backend.ts';
import { setMatmulKernel } from './matmul.ts';
import { rmsNorm as modelRmsNorm } from '../model.ts';
import { webgpuFeatures } from './device.ts';
import { RMS_NORM_KERNEL, type RmsReduction, rmsNorm } from './rms-norm.ts';
import { RMS_TOL, rmsNormChecks, rmsNormGradientCheck } from './testing/checks.ts';
import { kernelsRun, randomArray, runOn, webgpuSkipReason, worstRatio } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

describe.skipIf(skipReason !== null)(`our webgpu RMSNorm vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate (the engine test covers that)
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here
  });

  for (const reduction of ['subgroups', 'workgroup'] as RmsReduction[]) {
    it(`matches with the ${reduction} reduction, in one kernel`, async (ctx) => {
      if (reduction === 'subgroups' && !webgpuFeatures()?.subgroups) ctx.skip(); // the device lacks subgroups
      for (const c of await rmsNormChecks(reduction)) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
      const inputs = [
        { data: randomArray(65, 1), shape: [65] },
        { data: randomArray(65, 2), shape: [65] },
      ];
      expect(await kernelsRun(inputs, (x, w) => rmsNorm(x, w, 1e-6))).toEqual([RMS_NORM_KERNEL]);
    });
  }

  it('computes a different norm for a different eps (the comparison can fail)', async () => {
    const inputs = [
      { data: randomArray(33 * 65, 5, 0.01), shape: [33, 65] },
      { data: randomArray(65, 6), shape: [65] },
    ];
    const [want] = await runOn('cpu', inputs, (x, w) => modelRmsNorm(x, w, 1e-6));
    const [got] = await runOn('webgpu', inputs, (x, w) => rmsNorm(x, w, 1e-3));
    expect(worstRatio(got, want, RMS_TOL.atol, RMS_TOL.rtol)).toBeGreaterThan(1);
  });

  it('gives the cpu gradient for x and w', async () => {
    const c = await rmsNormGradientCheck();
    expect(c.ratio, c.name).toBeLessThanOrEqual(1);
  });
});
