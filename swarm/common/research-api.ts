/**
 * The research system's control-API shapes: studies, their runs and analysis, the lab notebook.
 *
 *   GET  /api/studies                      → { studies: StudySummary[] } newest first
 *   POST /api/studies {file?|text?|study?} → StudySummary (201); a bad study is 400 StudyFileError naming its key
 *   POST /api/studies/ask {question, planner, budget} → StudySummary (201): the LLM planner writes the study
 *   GET  /api/studies/:id                  → StudyDetail
 *   POST /api/studies/:id/stop | /resume   → StudySummary
 *   GET  /api/studies/:id/report.md | report.html → the report
 *   GET  /api/notebook                     → { findings: NotebookFinding[] }
 */
import type { DecisionOutcome, DecisionResult } from './research/decision.ts';

export type StudyStatus = 'planning' | 'running' | 'stopping' | 'stopped' | 'done' | 'failed';
export type StudyRunStatus = 'pending' | 'running' | 'done' | 'failed' | 'stopped';

export interface StudyRunCurve {
  /** The training runs (in the run's own store) this study run made, oldest first. */
  runIds: string[];
  steps: { step: number; rewardMean: number; successRate: number | null; loss: number | null; kl: number | null }[];
  evals: StudyEvalPoint[];
  /** The held-out evaluation of the final weights, or null before it. */
  finalEval: StudyEvalPoint | null;
}

export interface StudyEvalPoint {
  step: number;
  policyVersion: number;
  episodes: number;
  successRate: number;
  meanReward: number;
}

export interface StudyRunRecord {
  id: string;
  stage: number;
  arm: string;
  /** The knob values of the arm (searches), or {} for an arm listed by name. */
  params: Record<string, number | string | boolean>;
  seed: number;
  steps: number;
  status: StudyRunStatus;
  /** Starts of this run (a failed or stalled run is started again up to the study's restart limit). */
  attempts: number;
  reason: string | null;
  metric: number | null;
  /** The run's own data dir: `agentjet runs show ID --data-dir DIR` opens it. */
  dir: string;
  /** The study run this one continues (successive halving's promotions), or null. */
  continues: string | null;
  runStep: number;
  phase: 'training' | 'evaluating' | null;
  startedAt: string | null;
  endedAt: string | null;
}

export interface StudySummary {
  id: string;
  name: string;
  question: string;
  status: StudyStatus;
  /** Why the study ended (failed, stopped, budget), or null. */
  reason: string | null;
  planner: string;
  stage: number;
  stages: number;
  runs: { total: number; done: number; running: number; failed: number; stopped: number };
  decision: DecisionOutcome | null;
  createdAt: string;
  endedAt: string | null;
}

export interface ArmAnalysis {
  stage: number;
  arm: string;
  params: Record<string, number | string | boolean>;
  steps: number;
  /** The metric of each finished run, by seed. */
  values: { seed: number; value: number }[];
  n: number;
  mean: number | null;
  low: number | null;
  high: number | null;
  /** Runs of the arm that failed or were stopped early. */
  failed: number;
  /** Mean ± band over seeds of the rollout reward per step, and of held-out success per eval step. */
  rewardBand: BandPoint[];
  evalBand: BandPoint[];
}

/** One step of an arm's curve over its seeds: mean and 95% t band (stats.ts). */
export type { BandPoint } from './research/stats.ts';
import type { BandPoint } from './research/stats.ts';

export interface StudyAnalysis {
  metric: string;
  arms: ArmAnalysis[];
  /** The arm the decision is about when its criterion names `best`, else null. */
  best: string | null;
  decision: DecisionResult | null;
  /** The criterion in words, as written before any result. */
  criterion: string;
  threats: string[];
}

export interface StudyEvent {
  time: string;
  kind: 'created' | 'stage' | 'plan' | 'run-start' | 'run-end' | 'restart' | 'early-stop' | 'resume' | 'stop' | 'done' | 'failed';
  message: string;
}

export interface StudyDetail extends StudySummary {
  hypothesis: string;
  /** The study as validated (paths resolved), and the text it was given as. */
  spec: Record<string, unknown>;
  source: string;
  /** Every run of the study, in the order they were planned. */
  studyRuns: StudyRunRecord[];
  events: StudyEvent[];
  analysis: StudyAnalysis | null;
}

export interface NotebookFinding {
  studyId: string;
  question: string;
  decision: DecisionOutcome;
  statement: string;
  createdAt: string;
}
