/**
 * A study's curves, as chart series: per arm, the mean over seeds of the rollout reward (or held-out success)
 * per step, with its band. Pure, so the view only draws.
 */
import type { ArmAnalysis, BandPoint, StudyAnalysis } from '../../../../swarm/common/research-api.ts';
import type { ChartSeries } from '../charts/chart-types.ts';

export type BandKind = 'rewardBand' | 'evalBand';

/**
 * The arm's name, with its stage (counted from 1; the API counts from 0) when the study has more than one: an arm
 * may run again in a later stage.
 */
export function armLabel(arm: Pick<ArmAnalysis, 'arm' | 'stage'>, manyStages: boolean): string {
  return manyStages ? `${arm.arm} (stage ${arm.stage + 1})` : arm.arm;
}

export function armKey(arm: Pick<ArmAnalysis, 'arm' | 'stage'>): string {
  return `${arm.stage}:${arm.arm}`;
}

export function bandSeries(
  analysis: StudyAnalysis,
  kind: BandKind,
  colour: (index: number) => string,
): ChartSeries[] {
  const manyStages = new Set(analysis.arms.map((a) => a.stage)).size > 1;
  return analysis.arms
    .filter((arm) => arm[kind].length > 0)
    .map((arm, index) => {
      const points = [...arm[kind]].sort((a, b) => a.step - b.step);
      const hasBand = points.some((p: BandPoint) => p.low !== null && p.high !== null);
      return {
        key: `${armKey(arm)}:${kind}`,
        label: armLabel(arm, manyStages),
        x: points.map((p) => p.step),
        y: points.map((p) => (Number.isFinite(p.mean) ? p.mean : null)),
        colour: colour(index),
        band: hasBand ? { lower: points.map((p) => p.low), upper: points.map((p) => p.high) } : undefined,
      };
    });
}
