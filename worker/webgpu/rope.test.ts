/**
 * Our RoPE kernel against worker/model.ts's applyRope (a matmul by the rotate-half matrix) on the cpu backend, with
 * the model's own tables (cases in testing/checks.ts): Qwen2.5-0.5B's head layout (14 query / 2 KV heads of 64),
 * long contexts (positions past 8k, where the angles are large), the smallest head (hd = 2), and the gradient (the
 * inverse rotation). Skips only without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { selectBackend } from '../backend.ts';
import { setMatmulKernel } from './matmul.ts';
import { applyRope, ROPE_KERNEL } from './rope.ts';
import { modelRope, ROPE_CASES, ROPE_TOL, ropeChecks, ropeInputs } from './testing/checks.ts';
import { kernelsRun, runOn, webgpuSkipReason, worstRatio } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

describe.skipIf(skipReason !== null)(`our webgpu RoPE vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate (the engine test covers that)
    await selectBackend('webgpu', { syncReads: false }); // a failed self-check fails here
  });

  it('rotates as the model does, forward and backward, GQA head counts and long contexts included, in one kernel', async () => {
    for (const c of await ropeChecks()) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    expect(await kernelsRun(ropeInputs(ROPE_CASES[0], 1).slice(0, 3), applyRope)).toEqual([ROPE_KERNEL]);
  });

  it('differs from the model when the positions differ (the comparison can fail)', async () => {
    const c = ROPE_CASES[1];
    const [want] = await runOn('cpu', ropeInputs(c, 3).slice(0, 3), modelRope);
    const [got] = await runOn('webgpu', ropeInputs({ ...c, firstPosition: c.firstPosition + 1 }, 3).slice(0, 3), applyRope);
    expect(worstRatio(got, want, ROPE_TOL.atol, ROPE_TOL.rtol)).toBeGreaterThan(1);
  });
});
