/** A study's report: the Markdown names each plot, and the page carries the same plots inline. */
import { describe, expect, it } from 'vitest';
import type { StudyRunCurve } from '../../common/research-api.ts';
import type { StudyRow, StudyRunRow } from '../store/studies.ts';
import { analyseStudy } from './analysis.ts';
import { parseStudyText } from './study-file.ts';
import { renderStudyReport } from './study-report.ts';

const text = `name: s
question: q
hypothesis: h
decision: { kind: difference, better: b, than: a }
base: { script: agent.ts, tasks: { calculator: { train: 10, eval: 100 } } }
stages: [{ name: main, steps: 2, seeds: 2, arms: [{ name: a }, { name: b }] }]
`;
const study = parseStudyText(text, '/s');

function run(arm: string, seed: number, metric: number): StudyRunRow {
  const evals = [0, 2].map((step, i) => ({ step, policyVersion: i, episodes: 100, successRate: i ? metric : 0.1, meanReward: i ? metric : 0.1 }));
  const curve: StudyRunCurve = { runIds: ['policy-1'], steps: [1, 2].map((step) => ({ step, rewardMean: metric / step, successRate: null, loss: 0.1, kl: 0 })), evals, finalEval: evals[1] };
  return { id: `${arm}/${seed}`, studyId: 's-1', stage: 0, arm, params: {}, plan: {}, seed, steps: 2, continues: null, dir: `/d/${arm}-${seed}`, status: 'done', attempts: 1, reason: null, metric, curve, startedAt: null, endedAt: null };
}

describe('a study report', () => {
  it('draws each arm\'s curves, names them in the Markdown, and puts them inline in the page', () => {
    const runs = [run('a', 1, 0.2), run('a', 2, 0.3), run('b', 1, 0.6), run('b', 2, 0.7)];
    const row: StudyRow = { id: 's-1', seq: 1, name: 's', question: 'q', hypothesis: 'h', spec: study as unknown as Record<string, unknown>, source: text, baseDir: '/s', planner: 'built-in', status: 'done', reason: null, stage: 0, decision: null, analysis: analyseStudy(study, runs), createdAt: '', endedAt: null };
    const report = renderStudyReport({ study: row, runs, events: [], analysis: row.analysis });
    expect(report.plots.map((p) => p.file)).toEqual(['reward.svg', 'eval.svg']);
    for (const plot of report.plots) {
      expect(report.markdown).toContain(`![${plot.file}](${plot.file})`);
      expect(report.html).toContain(plot.svg);
    }
    expect(report.html).not.toContain('![reward.svg]');
  });
});
