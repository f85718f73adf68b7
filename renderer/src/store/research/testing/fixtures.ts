/** Studies as the control API answers them, for the research slice's and view helpers' tests. */
import type {
  ArmAnalysis,
  StudyDetail,
  StudyRunRecord,
  StudySummary,
} from '../../../../../swarm/common/research-api.ts';

export function studySummary(n: number, over: Partial<StudySummary> = {}): StudySummary {
  return {
    id: `study-${n}`,
    name: `kl-${n}`,
    question: `Does a KL penalty help (${n})?`,
    status: 'running',
    reason: null,
    planner: 'file',
    stage: 0,
    stages: 1,
    runs: { total: 6, done: 2, running: 2, failed: 0, stopped: 0 },
    decision: null,
    createdAt: new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString(),
    endedAt: null,
    ...over,
  };
}

export function studyRun(arm: string, seed: number, over: Partial<StudyRunRecord> = {}): StudyRunRecord {
  return {
    id: `${arm}-${seed}`,
    stage: 0,
    arm,
    params: {},
    seed,
    steps: 4,
    status: 'running',
    attempts: 1,
    reason: null,
    metric: null,
    dir: `/data/studies/s/${arm}-${seed}`,
    continues: null,
    runStep: 2,
    phase: 'training',
    startedAt: '2026-01-01T00:01:00.000Z',
    endedAt: null,
    ...over,
  };
}

export function armAnalysis(arm: string, over: Partial<ArmAnalysis> = {}): ArmAnalysis {
  return {
    stage: 0,
    arm,
    params: {},
    steps: 4,
    values: [
      { seed: 1, value: 0.5 },
      { seed: 2, value: 0.6 },
    ],
    n: 2,
    mean: 0.55,
    low: 0.4,
    high: 0.7,
    failed: 0,
    rewardBand: [
      { step: 1, n: 2, mean: 0.2, low: 0.1, high: 0.3 },
      { step: 2, n: 2, mean: 0.4, low: 0.3, high: 0.5 },
    ],
    evalBand: [{ step: 4, n: 2, mean: 0.55, low: 0.4, high: 0.7 }],
    ...over,
  };
}

export function studyDetail(n: number, over: Partial<StudyDetail> = {}): StudyDetail {
  return {
    ...studySummary(n),
    hypothesis: 'A KL penalty keeps held-out success from collapsing.',
    spec: {
      decision: {
        kind: 'difference',
        better: 'kl-0.05',
        than: 'kl-0',
        minDifference: 0.05,
        confidence: 0.95,
        test: 'welch',
      },
    },
    source: 'name: kl',
    studyRuns: [studyRun('kl-0', 1), studyRun('kl-0.05', 1)],
    events: [{ time: '2026-01-01T00:00:00.000Z', kind: 'created', message: 'created' }],
    analysis: null,
    ...over,
  };
}
