/**
 * The research service of a peer: studies (research/study-file.ts) executed on this peer, their live state, reports
 * and the lab notebook, behind the control API (routes in swarm/common/research-api.ts). Studies left unfinished by
 * a stop of the peer resume at its next start. A study written by the LLM planner (`POST /api/studies/ask`) is
 * planned in the background; the study never runs a plan that did not validate.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { StudyAnalysis, StudyDetail } from '../../common/research-api.ts';
import { ControlRouter } from '../control/routes.ts';
import { conflict, HttpError, notFound } from '../http/errors.ts';
import { readValidated, sendJson } from '../http/respond.ts';
import { studyDir } from '../paths.ts';
import type { PeerContext, ServiceHandle } from '../services.ts';
import {
  getStudy,
  insertStudy,
  insertStudyEvent,
  listStudies,
  notebookFindings,
  recordFinding,
  requeueInterruptedRuns,
  setStudyPlan,
  studyDetail,
  studySummary,
  unfinishedStudies,
  updateStudy,
  type StudyRow,
} from '../store/studies.ts';
import { endpointFromEnvironment, planStudy, PlannerError, proposeNextStage, type PlannerBudget, type PlannerEndpoint } from './llm-planner.ts';
import { STOPPED_BY_REQUEST, StudyExecutor } from './study-executor.ts';
import { parseStudyText, StudyFileError, type Study } from './study-file.ts';
import { readStudyReportInput, renderStudyReport, writeStudyReport } from './study-report.ts';
import type { StartRunPeer } from './study-run.ts';

/** A study file of more than this is not a study (the largest shipped one is 2 kB). */
const MAX_STUDY_BYTES = 1_000_000;

const submitSchema = z
  .object({
    /** The study file's text (YAML or JSON) and the folder its relative paths are taken from. */
    text: z.string().min(1).max(MAX_STUDY_BYTES),
    baseDir: z.string().min(1),
    format: z.enum(['yaml', 'json']).default('yaml'),
  })
  .strict();

const askSchema = z
  .object({
    question: z.string().min(1).max(2000),
    /** `self`: a model hosted on this peer; `env`: AGENTJET_PLANNER_URL/MODEL/API_KEY; or an endpoint. */
    planner: z.union([
      z.literal('env'),
      // A model hosted on this peer, by name; without one, the first the peer hosts.
      z.object({ self: z.string().min(1).nullable() }).strict(),
      z.object({ baseUrl: z.string().url(), model: z.string().min(1), apiKey: z.string().default('') }).strict(),
    ]),
    budget: z.object({ maxRuns: z.number().int().min(1).max(1000).optional(), maxWallMinutes: z.number().positive().optional() }).strict().default({}),
    /** What a plan starts from when the question does not say: the base run's model, script, reward and tasks. */
    defaults: z.record(z.string(), z.unknown()),
    baseDir: z.string().min(1),
    maxAttempts: z.number().int().min(1).max(10).default(3),
  })
  .strict();

export interface ResearchServiceOptions {
  startPeer: StartRunPeer;
  /** An OpenAI-compatible endpoint for a model hosted on this peer (an eval episode's key), for `planner: self`. */
  selfEndpoint: (model: string | undefined) => Promise<PlannerEndpoint>;
}

export class ResearchService implements ServiceHandle {
  readonly name = 'research';
  readonly routes: ControlRouter;
  private readonly executors = new Map<string, StudyExecutor>();
  private readonly planning = new Map<string, AbortController>();
  /** The LLM planner of each asked study, kept in memory only (its key is never stored): after a restart of the
   * peer such a study finishes the stages it has. */
  private readonly planners = new Map<string, { endpoint: PlannerEndpoint; studyValue: unknown; baseDir: string; budget: PlannerBudget; maxAttempts: number }>();
  private closed = false;

  constructor(
    private readonly ctx: PeerContext,
    private readonly options: ResearchServiceOptions,
  ) {
    this.routes = new ControlRouter(ctx.controlToken);
    this.addRoutes(this.routes);
  }

  /** Resumes the studies a stop of the peer interrupted. */
  resumeUnfinished(): void {
    for (const study of unfinishedStudies(this.ctx.db)) {
      if (study.status === 'planning') {
        updateStudy(this.ctx.db, study.id, { status: 'failed', reason: 'the peer stopped while the planner was writing the study; ask again' });
        continue;
      }
      insertStudyEvent(this.ctx.db, study.id, 'resume', 'the peer started again; the study continues where it was');
      this.launch(study);
    }
  }

  /** Validates and starts a study; StudyFileError (400) names what is wrong and nothing is stored. */
  submit(text: string, baseDir: string, format: 'yaml' | 'json' = 'yaml', planner = 'built-in (the study as written)'): StudyRow {
    const study = parseStudyText(text, baseDir, format);
    const row = insertStudy(this.ctx.db, { name: study.name, question: study.question, hypothesis: study.hypothesis, spec: study as unknown as Record<string, unknown>, source: text, baseDir, planner, status: 'running' });
    insertStudyEvent(this.ctx.db, row.id, 'created', `study created (${planner}); criterion written before any result`);
    this.launch(row);
    return row;
  }

  /** Stops a running study (its runs are stopped; resume continues it). */
  async stop(id: string): Promise<void> {
    const study = this.study(id);
    const executor = this.executors.get(study.id);
    const planning = this.planning.get(study.id);
    if (planning) {
      planning.abort();
      return;
    }
    if (!executor) throw conflict(`study ${id} is ${study.status}, not running`, 'study_not_running');
    await executor.stop();
  }

  resume(id: string): StudyRow {
    const study = this.study(id);
    if (this.executors.has(study.id) || this.planning.has(study.id)) throw conflict(`study ${id} is already running`, 'study_running');
    if (study.status === 'done') throw conflict(`study ${id} is done; submit it again to repeat it`, 'study_done');
    if (Object.keys(study.spec).length === 0) throw conflict(`study ${id} was never planned; ask again`, 'study_unplanned');
    updateStudy(this.ctx.db, study.id, { status: 'running', reason: null });
    const requeued = requeueInterruptedRuns(this.ctx.db, study.id, STOPPED_BY_REQUEST);
    insertStudyEvent(this.ctx.db, study.id, 'resume', `resumed by request${requeued ? `; ${requeued} run(s) the stop cut short start again` : ''}`);
    this.launch(getStudy(this.ctx.db, study.id)!);
    return getStudy(this.ctx.db, study.id)!;
  }

  detail(id: string): StudyDetail {
    const study = this.study(id);
    return studyDetail(this.ctx.db, study, this.executors.get(study.id)?.live);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const planning of this.planning.values()) planning.abort();
    await Promise.allSettled([...this.executors.values()].map((executor) => executor.close()));
  }

  private study(id: string): StudyRow {
    const study = getStudy(this.ctx.db, id);
    if (!study) throw notFound(`no study "${id}"; GET /api/studies lists them`, 'study_not_found');
    return study;
  }

  private studyDir(id: string): string {
    return studyDir(this.ctx.paths.dataDir, id);
  }

  private launch(row: StudyRow): void {
    if (this.closed) return;
    const dir = this.studyDir(row.id);
    mkdirSync(dir, { recursive: true });
    const study = row.spec as unknown as Study;
    writeFileSync(join(dir, 'study.json'), JSON.stringify(study, null, 2) + '\n');
    const executor = new StudyExecutor(row.id, study, {
      db: this.ctx.db,
      log: this.ctx.log.child({ service: 'research' }),
      startPeer: this.options.startPeer,
      dir,
      changed: () => this.ctx.publish({ type: 'study', data: studySummary(this.ctx.db, getStudy(this.ctx.db, row.id)!) }),
      finished: () => this.finished(row.id),
      nextStage: this.planners.has(row.id) ? (current, analysis) => this.proposeStage(row.id, current, analysis) : undefined,
    });
    this.executors.set(row.id, executor);
    void executor.start().finally(() => this.executors.delete(row.id));
  }

  /** A study ended: its report is written and, when it reached a decision, its finding goes into the notebook. */
  private finished(id: string): void {
    const study = getStudy(this.ctx.db, id)!;
    try {
      writeStudyReport(readStudyReportInput(this.ctx.db, study), this.studyDir(id));
    } catch (err) {
      this.ctx.log.warn('study report not written', { study: id, error: (err as Error).message });
    }
    if (study.status === 'done' && study.decision) {
      recordFinding(this.ctx.db, { studyId: id, question: study.question, decision: study.decision.outcome, statement: study.decision.statement, createdAt: new Date().toISOString() });
    }
  }

  /** Asks the study's LLM planner for one more stage; records its answer and rationale. */
  private async proposeStage(id: string, study: Study, analysis: StudyAnalysis): Promise<Study | null> {
    const planner = this.planners.get(id)!;
    const next = await proposeNextStage({
      endpoint: planner.endpoint,
      baseDir: planner.baseDir,
      maxAttempts: planner.maxAttempts,
      study,
      studyValue: planner.studyValue,
      results: { metric: analysis.metric, arms: analysis.arms.map(({ rewardBand: _r, evalBand: _e, ...arm }) => arm), decisionSoFar: analysis.decision },
      budget: planner.budget,
      notebook: notebookFindings(this.ctx.db, 20),
    });
    for (const attempt of next.attempts) {
      insertStudyEvent(this.ctx.db, id, 'plan', `next stage, attempt ${attempt.attempt}: ${attempt.accepted ? 'accepted' : `rejected: ${attempt.errors.join('; ')}`}`);
    }
    insertStudyEvent(this.ctx.db, id, 'plan', `${next.action === 'stop' ? 'the planner stops' : 'the planner adds a stage'}: ${next.rationale}`);
    if (next.action === 'stop') return null;
    const value = planner.studyValue as { stages: unknown[] };
    planner.studyValue = { ...value, stages: [...value.stages, next.stage] };
    updateStudy(this.ctx.db, id, { source: JSON.stringify(planner.studyValue, null, 2) });
    return next.study;
  }

  /** The LLM planner writes the study in the background; an invalid or unreachable planner ends it with the reason. */
  private ask(request: z.output<typeof askSchema>): StudyRow {
    const row = insertStudy(this.ctx.db, { name: 'ask', question: request.question, hypothesis: '(the planner writes it)', spec: {}, source: '', baseDir: request.baseDir, planner: plannerLabel(request.planner), status: 'planning' });
    insertStudyEvent(this.ctx.db, row.id, 'created', `the planner (${row.planner}) is writing the study`);
    const controller = new AbortController();
    this.planning.set(row.id, controller);
    void (async () => {
      try {
        const endpoint = await this.endpointOf(request.planner);
        const plan = await planStudy({
          question: request.question,
          endpoint,
          baseDir: request.baseDir,
          defaults: request.defaults,
          notebook: notebookFindings(this.ctx.db, 20).map((f) => ({ ...f, decision: f.decision })),
          budget: request.budget,
          maxAttempts: request.maxAttempts,
          signal: controller.signal,
        });
        for (const attempt of plan.attempts) {
          insertStudyEvent(this.ctx.db, row.id, 'plan', `attempt ${attempt.attempt}: ${attempt.accepted ? 'accepted' : `rejected: ${attempt.errors.join('; ')}`}`);
        }
        insertStudyEvent(this.ctx.db, row.id, 'plan', `rationale: ${plan.rationale}`);
        const study = plan.study;
        this.planners.set(row.id, { endpoint, studyValue: plan.value, baseDir: request.baseDir, budget: request.budget, maxAttempts: request.maxAttempts });
        setStudyPlan(this.ctx.db, row.id, { name: study.name, hypothesis: study.hypothesis, spec: study as unknown as Record<string, unknown>, source: JSON.stringify(plan.value, null, 2) });
        this.planning.delete(row.id);
        this.launch(getStudy(this.ctx.db, row.id)!);
      } catch (err) {
        this.planning.delete(row.id);
        const attempts = err instanceof PlannerError ? err.attempts : [];
        for (const attempt of attempts) insertStudyEvent(this.ctx.db, row.id, 'plan', `attempt ${attempt.attempt}: rejected: ${attempt.errors.join('; ')}`);
        const reason = err instanceof PlannerError ? `planner ${err.code}: ${err.message}` : `${(err as Error).name}: ${(err as Error).message}`;
        updateStudy(this.ctx.db, row.id, { status: controller.signal.aborted ? 'stopped' : 'failed', reason });
        insertStudyEvent(this.ctx.db, row.id, 'failed', reason);
        this.ctx.publish({ type: 'study', data: studySummary(this.ctx.db, getStudy(this.ctx.db, row.id)!) });
      }
    })();
    return row;
  }

  private async endpointOf(planner: z.output<typeof askSchema>['planner']): Promise<PlannerEndpoint> {
    if (planner === 'env') {
      const endpoint = endpointFromEnvironment();
      if (!endpoint) throw new PlannerError('unreachable', 'no planner configured: set AGENTJET_PLANNER_URL (and AGENTJET_PLANNER_MODEL, AGENTJET_PLANNER_API_KEY) in the peer\'s environment', []);
      return endpoint;
    }
    if ('baseUrl' in planner) return planner;
    return this.options.selfEndpoint(planner.self ?? undefined);
  }

  private addRoutes(control: ControlRouter): void {
    const { db } = this.ctx;
    control.get('/api/studies', (_req, res) => sendJson(res, 200, { studies: listStudies(db).map((s) => studySummary(db, s)) }));
    control.post('/api/studies', async (req, res) => {
      const body = await readValidated(req, submitSchema);
      try {
        sendJson(res, 201, studySummary(db, this.submit(body.text, body.baseDir, body.format)));
      } catch (err) {
        if (err instanceof StudyFileError) throw new HttpError(400, err.name, err.message, { field: err.key ?? undefined, code: 'invalid_study' });
        throw err;
      }
    });
    control.post('/api/studies/ask', async (req, res) => {
      const body = await readValidated(req, askSchema);
      sendJson(res, 201, studySummary(db, this.ask(body)));
    });
    control.get('/api/studies/:id', (_req, res, { params }) => sendJson(res, 200, this.detail(params.id)));
    control.post('/api/studies/:id/stop', async (_req, res, { params }) => {
      await this.stop(params.id);
      sendJson(res, 200, studySummary(db, this.study(params.id)));
    });
    control.post('/api/studies/:id/resume', (_req, res, { params }) => sendJson(res, 200, studySummary(db, this.resume(params.id))));
    for (const [format, type] of [['md', 'text/markdown'], ['html', 'text/html']] as const) {
      // Rendered as asked, so a running study's report is current; the files are written when a study ends.
      control.get(`/api/studies/:id/report.${format}`, (_req, res, { params }) => {
        const report = renderStudyReport(readStudyReportInput(db, this.study(params.id)));
        const text = format === 'md' ? report.markdown : report.html;
        res.writeHead(200, { 'content-type': `${type}; charset=utf-8`, 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    }
    control.get('/api/notebook', (_req, res) => sendJson(res, 200, { findings: notebookFindings(db) }));
  }
}

function plannerLabel(planner: z.output<typeof askSchema>['planner']): string {
  if (planner === 'env') return 'LLM (AGENTJET_PLANNER_URL)';
  if ('baseUrl' in planner) return `LLM (${planner.model} at ${planner.baseUrl})`;
  return `LLM (${planner.self ? `model ${planner.self}` : 'a model'} on this peer)`;
}

export function startResearchService(ctx: PeerContext, options: ResearchServiceOptions): ResearchService {
  const service = new ResearchService(ctx, options);
  service.resumeUnfinished();
  return service;
}
