/**
 * Our SwiGLU kernel against worker/model.ts's formula (silu(g)·u as tf ops) on the cpu backend (cases in
 * testing/checks.ts): odd sizes, large |gate| (sigmoid's saturation), more elements than one grid dimension of
 * workgroups covers, and the gradient. Skips only without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { selectBackend } from '../backend.ts';
import { setMatmulKernel } from './matmul.ts';
import { swiglu, SWIGLU_KERNEL, swigluReference } from './swiglu.ts';
import { SWIGLU_TOL, swigluChecks } from './testing/checks.ts';
import { kernelsRun, randomArray, runOn, webgpuSkipReason, worstRatio } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

describe.skipIf(skipReason !== null)(`our webgpu SwiGLU vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate (the engine test covers that)
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here
  });

  it('matches forward and backward on odd and very large shapes, saturated gates included, in one kernel', async () => {
    for (const c of await swigluChecks()) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    const small = [
      { data: randomArray(7, 1), shape: [7] },
      { data: randomArray(7, 2), shape: [7] },
    ];
    expect(await kernelsRun(small, swiglu)).toEqual([SWIGLU_KERNEL]);
  });

  it('differs from silu(up)·gate (the comparison can fail)', async () => {
    const inputs = [
      { data: randomArray(33 * 65, 1, 3), shape: [33, 65] },
      { data: randomArray(33 * 65, 2, 3), shape: [33, 65] },
    ];
    const [want] = await runOn('cpu', inputs, (g, u) => swigluReference(u, g));
    const [got] = await runOn('webgpu', inputs, swiglu);
    expect(worstRatio(got, want, SWIGLU_TOL.atol, SWIGLU_TOL.rtol)).toBeGreaterThan(1);
  });
});
