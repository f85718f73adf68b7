/**
 * The subgroup kernels ('subgroup-f32', 'subgroup-f16': decode-shaped products reduced across a subgroup's lanes
 * with subgroupAdd) against the cpu backend on seeded random operands: every row count up to SKINNY_MAX_ROWS with K
 * and N that no subgroup size divides, K = 1, N = 1, both transposes (B transposed too, which only this shader takes
 * as skinny), batched and broadcast, and the general cases of matmul.test.ts (larger products take the tiled
 * shader). Where the device has subgroups the subgroup shader must have run every skinny case; where it lacks them
 * the choice falls back to the tiled kernels and the results must still match. Also in a small workgroup, so that
 * a subgroup loops over several column groups (what a GPU's wider subgroups do, and lavapipe's 8-wide ones in the
 * full workgroup do not). 'auto' must measure the subgroup shader where it can run. Skips only without an adapter.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { selectBackend } from '../backend.ts';
import { webgpuFeatures } from './device.ts';
import { relativeDeviation } from './gpu.ts';
import { calibrateMatmul, fastestAgreeing, matmulStats, setMatmulKernel, setSubgroupSkinnyThreads, SUBGROUP_SKINNY_THREADS, SubgroupThreadsError } from './matmul.ts';
import { SKINNY_MAX_ROWS } from './product-wgsl.ts';
import { type MatmulCase, matmulCases, matmulChecks, skinnyMatmulCases, SUBGROUP_FEW_THREADS, subgroupFewThreadsChecks } from './testing/checks.ts';
import { webgpuSkipReason } from './testing/gpu.ts';

const skipReason = await webgpuSkipReason();

const rowsOf = (c: MatmulCase) => (c.transposeA ? c.a[c.a.length - 1] : c.a[c.a.length - 2]);
const cases = () => [...skinnyMatmulCases(), ...matmulCases()];
const skinnyCount = () => cases().filter((c) => rowsOf(c) <= SKINNY_MAX_ROWS).length;

describe.skipIf(skipReason !== null)(`our webgpu subgroup matmul vs the cpu backend${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  beforeAll(async () => {
    setMatmulKernel('tiled-f32'); // chosen, so the selection does not calibrate (the last test does)
    await selectBackend('webgpu', { syncReads: false });
  });

  it('subgroup-f32 matches on skinny shapes of every row count, odd K and N, both transposes, batched', async () => {
    const before = { ...matmulStats };
    for (const c of await matmulChecks('subgroup-f32', cases())) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    expect(matmulStats.fallback - before.fallback).toBe(0);
    // Without subgroups the choice falls back to tiled-f32, whose skinny shader takes no transposed B.
    expect(matmulStats.skinnySubgroup - before.skinnySubgroup).toBe(webgpuFeatures()?.subgroups ? skinnyCount() : 0);
    expect(matmulStats.tiled + matmulStats.skinny - before.tiled - before.skinny).toBe(cases().length);
  });

  it('subgroup-f16 matches within f16 rounding where shader-f16 compiles, and is not silently f32', async (ctx) => {
    if (!webgpuFeatures()?.shaderF16) ctx.skip(); // the device lacks shader-f16 (lavapipe and GPUs have it)
    const before = { ...matmulStats };
    const checks = await matmulChecks('subgroup-f16', cases());
    for (const c of checks) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    expect(matmulStats.f16 - before.f16).toBe(cases().length);
    expect(matmulStats.skinnySubgroup - before.skinnySubgroup).toBe(webgpuFeatures()?.subgroups ? skinnyCount() : 0);
    expect(Math.max(...checks.map((c) => c.f32Ratio))).toBeGreaterThan(1); // f16's rounding shows
  });

  it(`subgroup-f32 matches with ${SUBGROUP_FEW_THREADS} threads a workgroup: several column groups per subgroup, subgroups part-full where wider`, async () => {
    const before = matmulStats.skinnySubgroup;
    for (const c of await subgroupFewThreadsChecks()) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
    expect(matmulStats.skinnySubgroup - before).toBe(webgpuFeatures()?.subgroups ? skinnyMatmulCases().length : 0);
  });

  it("'auto' takes the fastest kernel whose product agrees with the reference's, never one that failed its check", () => {
    const candidates = ['tiled-f32', 'subgroup-f32', 'tfjs'] as const;
    const ms = new Map([['tiled-f32', 3], ['subgroup-f32', 1], ['tfjs', 2]] as const);
    expect(fastestAgreeing(candidates, ms, new Map([['tiled-f32', 0], ['subgroup-f32', 1e-7], ['tfjs', 2e-7]] as const))).toBe('subgroup-f32');
    expect(fastestAgreeing(candidates, ms, new Map([['tiled-f32', 0], ['subgroup-f32', 0.4], ['tfjs', 2e-7]] as const))).toBe('tfjs');
    expect(fastestAgreeing(candidates, ms, new Map([['tiled-f32', 0], ['subgroup-f32', Infinity], ['tfjs', 0.5]] as const))).toBe('tiled-f32');
    // How far a result strays: NaN and a mismatch never agree.
    const want = Float32Array.from([1, -2, 4]);
    expect(relativeDeviation(Float32Array.from([1, -2, 4.002]), want)).toBeCloseTo(5e-4, 6);
    expect(relativeDeviation(Float32Array.from([1, NaN, 4]), want)).toBe(Infinity);
    expect(relativeDeviation(Float32Array.from([1, -2]), want)).toBe(Infinity);
    expect(relativeDeviation(Float32Array.from([1e-9]), Float32Array.from([0]))).toBe(Infinity);
  });

  it('refuses a workgroup size it cannot run, by name', () => {
    for (const bad of [0, 1.5, SUBGROUP_SKINNY_THREADS + 1]) expect(() => setSubgroupSkinnyThreads(bad)).toThrow(SubgroupThreadsError);
  });

  it("'auto' measures the subgroup shader for skinny products where the device has subgroups", async () => {
    setMatmulKernel('auto');
    const report = await calibrateMatmul();
    expect(report.includes('subgroup-f32')).toBe(webgpuFeatures()?.subgroups ?? false);
    // Every candidate's product was checked against ours, and every one agreed here.
    expect(report).not.toContain('failed its check');
    // Whatever it chose, a decode-shaped product still matches.
    for (const c of await matmulChecks('auto', skinnyMatmulCases().slice(0, 4))) expect(c.ratio, c.name).toBeLessThanOrEqual(1);
  });
});
