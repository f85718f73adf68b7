/** A study's analysis from its runs: arm intervals, bands over seeds, the decision, and the threats to validity. */
import { describe, expect, it } from 'vitest';
import type { StudyRunCurve } from '../../common/research-api.ts';
import { tInterval } from '../../common/research/stats.ts';
import type { StudyRunRow } from '../store/studies.ts';
import { analyseStudy } from './analysis.ts';
import { parseStudyText } from './study-file.ts';

const study = parseStudyText(
  `name: s
question: q
hypothesis: h
decision: { kind: difference, better: b, than: a, minDifference: 0.1 }
base: { script: agent.ts, tasks: { calculator: { train: 10, eval: 100 } } }
stages: [{ name: main, steps: 2, seeds: 3, arms: [{ name: a }, { name: b }] }]
`,
  '/s',
);

function curve(successes: number[]): StudyRunCurve {
  const evals = successes.map((successRate, i) => ({ step: i * 2, policyVersion: i, episodes: 100, successRate, meanReward: successRate }));
  return { runIds: ['policy-1'], steps: [1, 2].map((step) => ({ step, rewardMean: successes.at(-1)! / step, successRate: null, loss: 0.1, kl: 0 })), evals, finalEval: evals.at(-1)! };
}

function run(arm: string, seed: number, metric: number | null, status: StudyRunRow['status'] = 'done'): StudyRunRow {
  return { id: `${arm}/${seed}`, studyId: 's-1', stage: 0, arm, params: {}, plan: {}, seed, steps: 2, continues: null, dir: `/d/${arm}-${seed}`, status, attempts: 1, reason: status === 'done' ? null : 'boom', metric, curve: metric === null ? null : curve([0.1, metric]), startedAt: null, endedAt: null };
}

describe('a study\'s analysis', () => {
  it('gives each arm its mean and t interval, bands over seeds, and the decision on the criterion', () => {
    const runs = [run('a', 1, 0.1), run('a', 2, 0.15), run('a', 3, 0.12), run('b', 1, 0.6), run('b', 2, 0.7), run('b', 3, 0.65)];
    const analysis = analyseStudy(study, runs);
    const b = analysis.arms.find((arm) => arm.arm === 'b')!;
    expect(b.n).toBe(3);
    expect(b.mean).toBeCloseTo(0.65, 12);
    const interval = tInterval([0.6, 0.7, 0.65]);
    expect([b.low, b.high]).toEqual([interval.low, interval.high]);
    expect(b.evalBand.map((p) => [p.step, p.n])).toEqual([[0, 3], [2, 3]]);
    expect(b.evalBand[1].mean).toBeCloseTo(0.65, 12);
    expect(analysis.decision?.outcome).toBe('met');
    expect(analysis.threats).toEqual([]);
  });

  it('judges the arms on the runs that finished, and names the failed ones and the thin arms as threats', () => {
    const runs = [run('a', 1, 0.1), run('a', 2, 0.15), run('a', 3, null, 'failed'), run('b', 1, 0.6), run('b', 2, null, 'stopped'), run('b', 3, null, 'pending')];
    const analysis = analyseStudy(study, runs);
    expect(analysis.arms.map((arm) => [arm.arm, arm.n, arm.failed])).toEqual([['a', 2, 1], ['b', 1, 1]]);
    expect(analysis.decision?.outcome).toBe('inconclusive');
    expect(analysis.threats.join(' ')).toMatch(/Few seeds/);
    expect(analysis.threats.join(' ')).toMatch(/Failed runs: 1/);
    expect(analysis.threats.join(' ')).toMatch(/Stopped runs: 1/);
    expect(analysis.threats.join(' ')).toMatch(/Budget cut: 1/);
  });
});
