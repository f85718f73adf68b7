import { describe, expect, it } from 'vitest';
import type { TrainStepSummary } from '../../../../swarm/common/api.ts';
import { evalPoint, runStep, trainingConfig } from '../../store/runs/testing/fixtures.ts';
import { MAX_CHECKPOINT_MARKERS, PANEL_IDS, buildPanels, stepColumns, type PanelSource } from './panels.ts';

function source(key: string, over: Partial<PanelSource> = {}): PanelSource {
  return { key, label: key, colour: '#123456', steps: [runStep(1), runStep(2)], evals: [], config: trainingConfig(), events: [], ...over };
}

const panel = (panels: ReturnType<typeof buildPanels>, id: string) => panels.find((p) => p.id === id)!;

describe('buildPanels', () => {
  it('gives every panel, in one fixed order, one series per run (two for tokens/s, policy lag and busy shares)', () => {
    const panels = buildPanels([source('a'), source('b'), source('c')]);
    expect(panels.map((p) => p.id)).toEqual(PANEL_IDS);
    for (const p of panels) expect(p.series).toHaveLength(['tokens-per-s', 'policy-lag', 'busy'].includes(p.id) ? 6 : 3);
    expect(panel(panels, 'reward').series.map((s) => s.key)).toEqual(['a', 'b', 'c']);
  });

  it('plots a run at its run step and a model step (no run) at its step', () => {
    const { runId: _r, runStep: _s, ...modelStep } = runStep(7);
    void _r;
    void _s;
    expect(stepColumns([runStep(3)]).x).toEqual([3]);
    expect(stepColumns([modelStep as TrainStepSummary]).x).toEqual([107]);
  });

  it('draws reward mean with a ± std band, unclamped, where steps report the spread', () => {
    const steps = [runStep(1, { rewardMean: 0.9, rewardStd: 0.5 }), runStep(2, { rewardMean: -0.2 })];
    const reward = panel(buildPanels([source('a', { steps })]), 'reward').series[0];
    expect(reward.y).toEqual([0.9, -0.2]);
    expect(reward.band?.lower[0]).toBeCloseTo(0.4);
    expect(reward.band?.upper[0]).toBeCloseTo(1.4);
    expect(reward.band?.upper[1]).toBeNull();
    expect(panel(buildPanels([source('a')]), 'reward').series[0].band).toBeUndefined();
  });

  it('derives tokens/s per phase: update from the step time, rollout as the step reports it', () => {
    const steps = [runStep(1, { rolloutTokensPerS: 321 })];
    const [update, rollout] = panel(buildPanels([source('a', { steps })]), 'tokens-per-s').series;
    expect(update.y).toEqual([4000]); // 2,000 tokens in 500 ms
    expect(rollout.y).toEqual([321]);
    expect(rollout.dashed).toBe(true);
  });

  it('derives merge savings as naive ÷ merged tokens and keeps shares in [0, 1]', () => {
    const steps = [runStep(1, { naiveTokens: 6000, discardedShare: 0.75 })];
    const panels = buildPanels([source('a', { steps })]);
    expect(panel(panels, 'merge-savings').series[0].y).toEqual([3]);
    expect(panel(panels, 'tree-savings').off).not.toBeNull(); // the fixture's steps trained on padded rows
    expect(panel(panels, 'discarded').series[0].y).toEqual([0.75]);
    expect(panel(panels, 'discarded').yDomain).toEqual([0, 1]);
    expect(panel(panels, 'discarded').format).toBe('percent');
    expect(panel(panels, 'grad-norm').logScaleAllowed).toBe(true);
  });

  it('derives the trainer busy share from the step phases beside the sampler’s, and plots the lag max and stale drops', () => {
    const steps = [runStep(1, { phases: { rolloutMs: 600, drainMs: 200, updateMs: 200 }, samplerBusyShare: 0.9, policyLagMean: 0.5, policyLagMax: 2, droppedStale: 3 })];
    const panels = buildPanels([source('a', { steps })]);
    const [trainer, sampler] = panel(panels, 'busy').series;
    expect(trainer.y).toEqual([0.2]);
    expect(sampler.y).toEqual([0.9]);
    expect(sampler.dashed).toBe(true);
    expect(panel(panels, 'policy-lag').series.map((s) => s.y)).toEqual([[0.5], [2]]);
    expect(panel(panels, 'stale').series[0].y).toEqual([3]);
  });

  it('derives tree savings as naive ÷ the tokens a tree update computed', () => {
    const base = runStep(1, { naiveTokens: 6000 });
    const steps = [{ ...base, metrics: { ...base.metrics, packing: 'tree' as const, computedTokens: 1500 } }];
    expect(panel(buildPanels([source('a', { steps })]), 'tree-savings').series[0].y).toEqual([4]);
  });

  it('turns the KL panel off only when every run trains without a KL penalty', () => {
    const off = (configs: Record<string, unknown>[]) =>
      panel(buildPanels(configs.map((config, i) => source(`r${i}`, { config }))), 'kl').off;
    expect(off([trainingConfig({ klCoef: 0 })])).not.toBeNull();
    expect(off([trainingConfig({ klCoef: 0 }), trainingConfig({ klCoef: 0.05 })])).toBeNull();
    expect(off([trainingConfig()])).toBeNull();
  });

  it('turns policy lag off only when no step reports it (a lag of 0 is a value)', () => {
    expect(panel(buildPanels([source('a')]), 'policy-lag').off).not.toBeNull();
    const steps = [runStep(1, { policyLagMean: 0 }), runStep(2, { policyLagMean: 0 })];
    expect(panel(buildPanels([source('a', { steps })]), 'policy-lag').off).toBeNull();
  });

  it('plots held-out success at the evaluated steps, the mean reward where no eval reported success', () => {
    const bySuccess = panel(buildPanels([source('a', { evals: [evalPoint(0, 0.25), evalPoint(10, 0.5)] })]), 'eval');
    expect(bySuccess.series[0]).toMatchObject({ x: [0, 10], y: [0.25, 0.5] });
    expect(bySuccess.format).toBe('percent');
    const byReward = panel(buildPanels([source('a', { evals: [evalPoint(5, null, 0.7)] })]), 'eval');
    expect(byReward.series[0].y).toEqual([0.7]);
    expect(byReward.format).toBe('number');
    expect(panel(buildPanels([source('a', { config: trainingConfig({ evalEvery: 0 }) })]), 'eval').off).not.toBeNull();
  });

  it('says why when there is nothing to draw', () => {
    const panels = buildPanels([source('a', { steps: [] })]);
    expect(panels.every((p) => p.off !== null)).toBe(true);
  });

  it('marks the runs’ events, named by run when several are overlaid; checkpoints only while few', () => {
    const event = (kind: 'config-change' | 'checkpoint', step: number) => ({ kind, step, time: '', label: `${kind} ${step}`, detail: {} });
    const one = buildPanels([source('a', { events: [event('config-change', 5)] })]);
    expect(one[0].markers).toEqual([{ x: 5, kind: 'config-change', label: 'config-change 5' }]);
    const two = buildPanels([source('a', { events: [event('config-change', 5)] }), source('b')]);
    expect(two[0].markers[0].label).toContain('a');
    const many = Array.from({ length: MAX_CHECKPOINT_MARKERS + 1 }, (_, i) => event('checkpoint', i));
    expect(buildPanels([source('a', { events: [...many, event('config-change', 3)] })])[0].markers).toHaveLength(1);
  });

  it('builds the columns of a steps array once', () => {
    const steps = [runStep(1)];
    expect(stepColumns(steps)).toBe(stepColumns(steps));
  });
});
