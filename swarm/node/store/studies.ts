/**
 * Studies in the store: the study rows, the runs each planned, their events, and the lab notebook. A study run is
 * inserted before it starts (status pending) and keyed by (study, stage, arm, seed, steps), so a study resumed
 * after a crash finds every run it planned and never plans one twice.
 */
import type { Database } from 'better-sqlite3';
import type { DecisionResult } from '../../common/research/decision.ts';
import type {
  NotebookFinding,
  StudyAnalysis,
  StudyDetail,
  StudyEvent,
  StudyRunCurve,
  StudyRunRecord,
  StudyRunStatus,
  StudyStatus,
  StudySummary,
} from '../../common/research-api.ts';
import { statement } from './statements.ts';

export interface StudyRow {
  id: string;
  seq: number;
  name: string;
  question: string;
  hypothesis: string;
  spec: Record<string, unknown>;
  source: string;
  baseDir: string;
  planner: string;
  status: StudyStatus;
  reason: string | null;
  stage: number;
  decision: DecisionResult | null;
  analysis: StudyAnalysis | null;
  createdAt: string;
  endedAt: string | null;
}

interface StudyDbRow {
  id: string;
  seq: number;
  name: string;
  question: string;
  hypothesis: string;
  spec: string;
  source: string;
  base_dir: string;
  planner: string;
  status: StudyStatus;
  reason: string | null;
  stage: number;
  decision: string | null;
  analysis: string | null;
  created_at: string;
  ended_at: string | null;
}

const now = () => new Date().toISOString();

function studyFromRow(row: StudyDbRow): StudyRow {
  return {
    id: row.id,
    seq: row.seq,
    name: row.name,
    question: row.question,
    hypothesis: row.hypothesis,
    spec: JSON.parse(row.spec) as Record<string, unknown>,
    source: row.source,
    baseDir: row.base_dir,
    planner: row.planner,
    status: row.status,
    reason: row.reason,
    stage: row.stage,
    decision: row.decision ? (JSON.parse(row.decision) as DecisionResult) : null,
    analysis: row.analysis ? (JSON.parse(row.analysis) as StudyAnalysis) : null,
    createdAt: row.created_at,
    endedAt: row.ended_at,
  };
}

/** Inserts a new study (status as given) and returns it; its id is `<name>-<seq>`. */
export function insertStudy(
  db: Database,
  study: Pick<StudyRow, 'name' | 'question' | 'hypothesis' | 'spec' | 'source' | 'baseDir' | 'planner' | 'status'>,
): StudyRow {
  return db.transaction(() => {
    const { seq } = statement(db, 'SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM studies').get() as { seq: number };
    const id = `${study.name}-${seq}`;
    statement(
      db,
      `INSERT INTO studies (id, seq, name, question, hypothesis, spec, source, base_dir, planner, status, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(id, seq, study.name, study.question, study.hypothesis, JSON.stringify(study.spec), study.source, study.baseDir, study.planner, study.status, now());
    return getStudy(db, id)!;
  })();
}

/** A study the planner wrote: its name, hypothesis and validated plan replace the placeholders of its row. */
export function setStudyPlan(db: Database, id: string, plan: Pick<StudyRow, 'name' | 'hypothesis' | 'spec' | 'source'>): void {
  statement(db, "UPDATE studies SET name = ?, hypothesis = ?, spec = ?, source = ?, status = 'running' WHERE id = ?").run(plan.name, plan.hypothesis, JSON.stringify(plan.spec), plan.source, id);
}

export function getStudy(db: Database, id: string): StudyRow | undefined {
  const row = statement(db, 'SELECT * FROM studies WHERE id = ?').get(id) as StudyDbRow | undefined;
  return row ? studyFromRow(row) : undefined;
}

export function listStudies(db: Database, limit = 1000): StudyRow[] {
  return (statement(db, 'SELECT * FROM studies ORDER BY seq DESC LIMIT ?').all(limit) as StudyDbRow[]).map(studyFromRow);
}

/** Studies a stop of the peer interrupted (planning, running or stopping): the next start resumes them. */
export function unfinishedStudies(db: Database): StudyRow[] {
  return (statement(db, "SELECT * FROM studies WHERE status IN ('planning', 'running', 'stopping') ORDER BY seq").all() as StudyDbRow[]).map(studyFromRow);
}

export function updateStudy(
  db: Database,
  id: string,
  change: Partial<Pick<StudyRow, 'status' | 'reason' | 'stage' | 'decision' | 'analysis' | 'spec' | 'source'>>,
): void {
  const row = getStudy(db, id);
  if (!row) return;
  const next = { ...row, ...change };
  const ended = next.status === 'done' || next.status === 'failed' || next.status === 'stopped';
  statement(db, 'UPDATE studies SET status = ?, reason = ?, stage = ?, decision = ?, analysis = ?, spec = ?, source = ?, ended_at = ? WHERE id = ?').run(
    next.status,
    next.reason,
    next.stage,
    next.decision ? JSON.stringify(next.decision) : null,
    next.analysis ? JSON.stringify(next.analysis) : null,
    JSON.stringify(next.spec),
    next.source,
    ended ? (row.endedAt ?? now()) : null,
    id,
  );
}

export interface StudyRunRow extends Omit<StudyRunRecord, 'runStep' | 'phase'> {
  studyId: string;
  /** What the run trains with: the arm's overrides and parts (JSON the executor wrote). */
  plan: Record<string, unknown>;
  curve: StudyRunCurve | null;
}

interface StudyRunDbRow {
  id: string;
  study_id: string;
  ord: number;
  stage: number;
  arm: string;
  params: string;
  plan: string;
  seed: number;
  steps: number;
  continues: string | null;
  dir: string;
  status: StudyRunStatus;
  attempts: number;
  reason: string | null;
  metric: number | null;
  curve: string | null;
  started_at: string | null;
  ended_at: string | null;
}

function studyRunFromRow(row: StudyRunDbRow): StudyRunRow {
  return {
    id: row.id,
    studyId: row.study_id,
    stage: row.stage,
    arm: row.arm,
    params: JSON.parse(row.params) as StudyRunRow['params'],
    plan: JSON.parse(row.plan) as Record<string, unknown>,
    seed: row.seed,
    steps: row.steps,
    continues: row.continues,
    dir: row.dir,
    status: row.status,
    attempts: row.attempts,
    reason: row.reason,
    metric: row.metric,
    curve: row.curve ? (JSON.parse(row.curve) as StudyRunCurve) : null,
    startedAt: row.started_at,
    endedAt: row.ended_at,
  };
}

/** Plans a run (pending); a run already planned with the same key is left as it is. */
export function planStudyRun(
  db: Database,
  run: Pick<StudyRunRow, 'studyId' | 'stage' | 'arm' | 'params' | 'plan' | 'seed' | 'steps' | 'continues' | 'dir'>,
): void {
  db.transaction(() => {
    const { ord } = statement(db, 'SELECT COALESCE(MAX(ord), 0) + 1 AS ord FROM study_runs WHERE study_id = ?').get(run.studyId) as { ord: number };
    const id = `${run.studyId}/${run.stage}/${run.arm}/s${run.seed}@${run.steps}`;
    statement(
      db,
      `INSERT OR IGNORE INTO study_runs (id, study_id, ord, stage, arm, params, plan, seed, steps, continues, dir, status)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')`,
    ).run(id, run.studyId, ord, run.stage, run.arm, JSON.stringify(run.params), JSON.stringify(run.plan), run.seed, run.steps, run.continues, run.dir);
  })();
}

export function studyRuns(db: Database, studyId: string): StudyRunRow[] {
  return (statement(db, 'SELECT * FROM study_runs WHERE study_id = ? ORDER BY ord').all(studyId) as StudyRunDbRow[]).map(studyRunFromRow);
}

export function updateStudyRun(
  db: Database,
  id: string,
  change: Partial<Pick<StudyRunRow, 'status' | 'attempts' | 'reason' | 'metric' | 'curve' | 'startedAt' | 'endedAt'>>,
): void {
  const row = statement(db, 'SELECT * FROM study_runs WHERE id = ?').get(id) as StudyRunDbRow | undefined;
  if (!row) return;
  const next = { ...studyRunFromRow(row), ...change };
  statement(db, 'UPDATE study_runs SET status = ?, attempts = ?, reason = ?, metric = ?, curve = ?, started_at = ?, ended_at = ? WHERE id = ?').run(
    next.status,
    next.attempts,
    next.reason,
    next.metric,
    next.curve ? JSON.stringify(next.curve) : null,
    next.startedAt,
    next.endedAt,
    id,
  );
}

/** Runs a stop of the study cut short are planned again, for its resume (runs stopped by a rule stay stopped). */
export function requeueInterruptedRuns(db: Database, studyId: string, reason: string): number {
  return statement(db, "UPDATE study_runs SET status = 'pending', reason = NULL, ended_at = NULL WHERE study_id = ? AND status = 'stopped' AND reason = ?").run(studyId, reason).changes;
}

export function insertStudyEvent(db: Database, studyId: string, kind: StudyEvent['kind'], message: string): StudyEvent {
  const event: StudyEvent = { time: now(), kind, message };
  statement(db, 'INSERT INTO study_events (study_id, time, kind, message) VALUES (?, ?, ?, ?)').run(studyId, event.time, kind, message);
  return event;
}

export function studyEvents(db: Database, studyId: string): StudyEvent[] {
  return statement(db, 'SELECT time, kind, message FROM study_events WHERE study_id = ? ORDER BY time, rowid').all(studyId) as StudyEvent[];
}

/** Keeps a finished study's finding (replacing an earlier one of the same study). */
export function recordFinding(db: Database, finding: NotebookFinding): void {
  statement(db, 'INSERT OR REPLACE INTO notebook (study_id, question, decision, statement, created_at) VALUES (?, ?, ?, ?, ?)').run(
    finding.studyId,
    finding.question,
    finding.decision,
    finding.statement,
    finding.createdAt,
  );
}

export function notebookFindings(db: Database, limit = 200): NotebookFinding[] {
  return statement(db, 'SELECT study_id AS studyId, question, decision, statement, created_at AS createdAt FROM notebook ORDER BY created_at DESC LIMIT ?').all(
    limit,
  ) as NotebookFinding[];
}

/** The list's row of a study: counts of its runs by status. */
export function studySummary(db: Database, study: StudyRow): StudySummary {
  const counts = statement(db, 'SELECT status, COUNT(*) AS n FROM study_runs WHERE study_id = ? GROUP BY status').all(study.id) as { status: StudyRunStatus; n: number }[];
  const count = (status: StudyRunStatus) => counts.find((c) => c.status === status)?.n ?? 0;
  const stages = Array.isArray(study.spec.stages) ? study.spec.stages.length : 0;
  return {
    id: study.id,
    name: study.name,
    question: study.question,
    status: study.status,
    reason: study.reason,
    planner: study.planner,
    stage: study.stage,
    stages,
    runs: { total: counts.reduce((n, c) => n + c.n, 0), done: count('done'), running: count('running'), failed: count('failed'), stopped: count('stopped') },
    decision: study.decision?.outcome ?? null,
    createdAt: study.createdAt,
    endedAt: study.endedAt,
  };
}

/** A study as the API shows it; `live` gives the phase and step of its running runs (none for a stopped peer). */
export function studyDetail(db: Database, study: StudyRow, live?: ReadonlyMap<string, Pick<StudyRunRecord, 'runStep' | 'phase'>>): StudyDetail {
  return {
    ...studySummary(db, study),
    hypothesis: study.hypothesis,
    spec: study.spec,
    source: study.source,
    studyRuns: studyRuns(db, study.id).map(({ studyId: _s, plan: _p, curve: _c, ...run }) => ({
      ...run,
      runStep: live?.get(run.id)?.runStep ?? 0,
      phase: live?.get(run.id)?.phase ?? null,
    })),
    events: studyEvents(db, study.id),
    analysis: study.analysis,
  };
}
