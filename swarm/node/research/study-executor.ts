/**
 * Executes one study, stage by stage (the built-in planner: the study as written, no LLM).
 *
 *   stage      its arms come from the stage's list or its search strategy (search/), over the base or the best arm
 *              of the stage before; each arm runs once per seed
 *   schedule   planned runs are inserted before they start, then run `concurrency` at a time on this peer
 *   guard      a failed or stalled run starts again up to `restarts` times; early-stop rules end a run with a reason
 *   analyse    when the last stage is done: per-arm bands and intervals, the decision against the criterion
 *
 * Every step is a row in the store first, so a study interrupted by a stop of the peer resumes where it was: runs
 * that were running start again in their folders (their training runs continue from the last checkpoint), and the
 * strategies, pure functions of the runs they are shown, propose nothing twice.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import { createStrategy, type ArmProposal, type Params, type SearchStrategy, type TrialOutcome } from '../../common/research/search/index.ts';
import type { StudyAnalysis, StudyRunCurve } from '../../common/research-api.ts';
import { parseModelSource } from '../models/model-spec.ts';
import { mergeOverrides, type TrainingConfigOverrides } from '../training/config.ts';
import { splitUserTasks, writeCalculatorTasks, type TaskFiles } from '../demo/task-files.ts';
import type { Logger } from '../log.ts';
import {
  getStudy,
  insertStudyEvent,
  planStudyRun,
  studyRuns,
  updateStudy,
  updateStudyRun,
  type StudyRunRow,
} from '../store/studies.ts';
import { analyseStudy } from './analysis.ts';
import { metricOf, readRunCurve } from './run-metrics.ts';
import { knobOverrides, seedsOf, type Study, type StudyArm, type StudyTasks } from './study-file.ts';
import { executeStudyRun, type GuardRules, type StartRunPeer, type StudyRunPlan, type StudyRunProgress } from './study-run.ts';

/** The reason of a run a stop of its study cut short (a resume plans it again). */
export const STOPPED_BY_REQUEST = 'the study was stopped';

export interface ExecutorDeps {
  db: Database;
  log: Logger;
  startPeer: StartRunPeer;
  /** The study's folder: task files, every run's data dir, the report. */
  dir: string;
  /** Something about the study changed (for the UI's live view). */
  changed: () => void;
  /** Called once the study has ended (done, failed or stopped) with its report written. */
  finished: () => void;
  /**
   * The LLM planner's say after the last planned stage: the study with one more stage (validated), or null to stop.
   * Absent for the built-in planner, which runs the study as written.
   */
  nextStage?: (study: Study, analysis: StudyAnalysis) => Promise<Study | null>;
}

/** One stage's arm as the executor plans it: a name, its knob values and everything its runs train with. */
interface PlannedArm {
  name: string;
  params: Params;
  parts: RunParts;
}

/** What an arm's runs are made of (the study's base with the arm's changes). */
interface RunParts {
  model: string;
  script: string;
  reward?: string;
  tasks: StudyTasks;
  training: TrainingConfigOverrides;
}

/** The executor's progress marks of running runs (in memory: the store has their status). */
export type LiveProgress = Map<string, StudyRunProgress>;

export class StudyExecutor {
  readonly live: LiveProgress = new Map();
  private readonly controller = new AbortController();
  /** Settles when the study is stopped or the peer stops: one listener for the life of the study, not one per wait. */
  private readonly aborted = new Promise<void>((resolve) => this.controller.signal.addEventListener('abort', () => resolve(), { once: true }));
  private stopRequested = false;
  private readonly startedAt = Date.now();
  private running: Promise<void> | undefined;
  private readonly taskFiles = new Map<string, Promise<TaskFiles>>();

  constructor(
    readonly studyId: string,
    private study: Study,
    private readonly deps: ExecutorDeps,
  ) {}

  /** Runs the study to its end; resolves when it has ended or the peer is stopping. */
  start(): Promise<void> {
    this.running ??= this.execute().catch((err: unknown) => {
      if (this.controller.signal.aborted && !this.stopRequested) return;
      this.end('failed', `the study failed: ${(err as Error).message}`);
    });
    return this.running;
  }

  /** The user stops the study: running runs are stopped and it ends as stopped (resume continues it). */
  async stop(): Promise<void> {
    this.stopRequested = true;
    updateStudy(this.deps.db, this.studyId, { status: 'stopping' });
    this.controller.abort();
    await this.running;
  }

  /** The peer stops: runs are interrupted and left to be started again when the study resumes. */
  async close(): Promise<void> {
    this.controller.abort();
    await this.running;
  }

  private get db() {
    return this.deps.db;
  }

  private async execute(): Promise<void> {
    const { db } = this;
    let stage = getStudy(db, this.studyId)?.stage ?? 0;
    let previousBest: PlannedArm | null = stage > 0 ? this.stageBest(stage - 1) : null;
    for (; stage < this.study.stages.length; stage++) {
      const stages = this.study.stages;
      if (stage !== getStudy(db, this.studyId)?.stage || studyRuns(db, this.studyId).every((r) => r.stage !== stage)) {
        updateStudy(db, this.studyId, { stage });
        this.event('stage', `stage ${stage + 1}/${stages.length} "${stages[stage].name}" begins${previousBest ? ` from ${previousBest.name}` : ''}`);
      }
      const finished = await this.runStage(stage, previousBest);
      if (!finished) return;
      previousBest = this.stageBest(stage);
      if (stage === this.study.stages.length - 1 && this.deps.nextStage) await this.askForNextStage();
    }
    const analysis = analyseStudy(this.study, studyRuns(db, this.studyId));
    updateStudy(db, this.studyId, { analysis, decision: analysis.decision });
    this.end('done', null);
  }

  /** After the last planned stage, the planner may add one more (recorded with its rationale) or stop. */
  private async askForNextStage(): Promise<void> {
    try {
      const next = await this.deps.nextStage!(this.study, analyseStudy(this.study, studyRuns(this.db, this.studyId)));
      if (!next || next.stages.length <= this.study.stages.length) return;
      this.study = next;
      updateStudy(this.db, this.studyId, { spec: next as unknown as Record<string, unknown> });
    } catch (err) {
      if (this.controller.signal.aborted) return;
      this.event('plan', `the planner proposed no valid next stage (${(err as Error).message}); the study concludes on the stages it ran`);
    }
  }

  /** Runs one stage to its end; false when the study ended (stopped, budget, peer stopping) before it did. */
  private async runStage(stage: number, from: PlannedArm | null): Promise<boolean> {
    const spec = this.study.stages[stage];
    const seeds = seedsOf(spec);
    const base = spec.from === 'best' && from ? from.parts : this.baseParts();
    const { strategy, arms } = this.stageStrategy(stage, base);
    const inFlight = new Map<string, Promise<void>>();
    for (;;) {
      if (this.controller.signal.aborted) return this.interrupted(inFlight);
      const budget = this.budgetSpent();
      if (budget) {
        this.controller.abort();
        await Promise.allSettled(inFlight.values());
        this.end('stopped', budget);
        return false;
      }
      const rows = studyRuns(this.db, this.studyId).filter((r) => r.stage === stage);
      const { arms: proposals } = strategy.next(rows.map(trialOf));
      for (const proposal of proposals) this.planArm(stage, proposal, arms, base, seeds);
      const pending = studyRuns(this.db, this.studyId).filter((r) => r.stage === stage && (r.status === 'pending' || (r.status === 'running' && !inFlight.has(r.id))));
      for (const row of pending) {
        if (inFlight.size >= this.study.concurrency) break;
        if (row.continues && !this.isDone(row.continues)) continue;
        const job = this.runOne(row).finally(() => inFlight.delete(row.id));
        inFlight.set(row.id, job);
      }
      // Nothing running and nothing that can start: the strategy is done, or waits on runs that can never finish.
      if (inFlight.size === 0) return true;
      await Promise.race([...inFlight.values(), this.aborted]);
    }
  }

  private async interrupted(inFlight: Map<string, Promise<void>>): Promise<false> {
    await Promise.allSettled(inFlight.values());
    if (this.stopRequested) this.end('stopped', 'stopped by request');
    return false;
  }

  private isDone(runId: string): boolean {
    return studyRuns(this.db, this.studyId).some((r) => r.id === runId && r.status === 'done');
  }

  /** Why the study's budget is spent, or null while it is not. */
  private budgetSpent(): string | null {
    const { budget } = this.study;
    if (Date.now() - this.startedAt > budget.maxWallMinutes * 60_000) return `budget: the study's wall time of ${budget.maxWallMinutes} min is spent`;
    const started = new Set(studyRuns(this.db, this.studyId).filter((r) => r.attempts > 0 && !r.continues).map((r) => `${r.stage}/${r.arm}/${r.seed}`));
    if (started.size > budget.maxRuns) return `budget: more than ${budget.maxRuns} runs`;
    return null;
  }

  /** The stage's strategy: its search, or its listed arms (all at once). */
  private stageStrategy(stage: number, base: RunParts): { strategy: SearchStrategy; arms: Map<string, PlannedArm> } {
    const spec = this.study.stages[stage];
    const arms = new Map<string, PlannedArm>();
    if (spec.includeBase) arms.set('base', { name: 'base', params: {}, parts: base });
    if (spec.arms) {
      for (const arm of spec.arms) arms.set(arm.name, { name: arm.name, params: {}, parts: applyArm(base, arm) });
      return { strategy: listedArms([...arms.values()], spec.steps, seedsOf(spec).length), arms };
    }
    const search = createStrategy(spec.search!, { steps: spec.steps, seeds: seedsOf(spec).length, seed: spec.searchSeed, parallelArms: this.study.concurrency });
    if (!spec.includeBase) return { strategy: search, arms };
    // The base as a control beside the search: run once with the stage's full steps.
    const control = listedArms([arms.get('base')!], spec.steps, seedsOf(spec).length);
    return {
      arms,
      strategy: {
        name: search.name,
        next: (trials) => {
          const own = control.next(trials.filter((t) => t.arm === 'base'));
          const searched = search.next(trials.filter((t) => t.arm !== 'base'));
          return { arms: [...own.arms, ...searched.arms], done: own.done && searched.done };
        },
        best: (trials) => search.best(trials.filter((t) => t.arm !== 'base')),
      },
    };
  }

  private planArm(stage: number, proposal: ArmProposal, arms: Map<string, PlannedArm>, base: RunParts, seeds: number[]): void {
    const arm = arms.get(proposal.arm) ?? { name: proposal.arm, params: proposal.params, parts: { ...base, training: mergeOverrides(base.training, knobOverrides(proposal.params) as TrainingConfigOverrides) } };
    arms.set(arm.name, arm);
    for (const seed of seeds) {
      const continues = proposal.continues ? studyRuns(this.db, this.studyId).find((r) => r.stage === stage && r.arm === proposal.continues && r.seed === seed && r.steps < proposal.steps && r.status === 'done') : undefined;
      planStudyRun(this.db, {
        studyId: this.studyId,
        stage,
        arm: arm.name,
        params: arm.params,
        plan: arm.parts as unknown as Record<string, unknown>,
        seed,
        steps: proposal.steps,
        continues: continues?.id ?? null,
        dir: join(this.deps.dir, 'runs', `${stage + 1}-${safeName(arm.name)}-s${seed}`),
      });
    }
  }

  /** Runs one planned run; records how it ended. */
  private async runOne(row: StudyRunRow): Promise<void> {
    const { db } = this;
    const attempts = row.status === 'running' ? row.attempts : row.attempts + 1;
    updateStudyRun(db, row.id, { status: 'running', attempts, startedAt: row.startedAt ?? new Date().toISOString(), reason: null });
    this.event(row.status === 'running' ? 'resume' : 'run-start', `${describeRun(row)} ${row.status === 'running' ? 'continues' : attempts > 1 ? `starts again (attempt ${attempts})` : 'starts'}`);
    this.deps.changed();
    let end;
    try {
      const plan = await this.runPlan(row);
      end = await executeStudyRun(this.deps.startPeer, plan, this.guardRules(), this.controller.signal, (progress) => {
        this.live.set(row.id, progress);
      });
    } catch (err) {
      end = { outcome: 'failed' as const, reason: `${(err as Error).name}: ${(err as Error).message}`, retryable: true };
    } finally {
      this.live.delete(row.id);
    }
    if (this.controller.signal.aborted && !this.stopRequested) return; // the peer stops: resumed at its next start
    const curve = safeCurve(row.dir);
    const endedAt = new Date().toISOString();
    if (end.outcome === 'done') {
      const metric = curve ? metricOf(this.study.metric, curve) : null;
      updateStudyRun(db, row.id, { status: 'done', metric, curve, endedAt });
      this.event('run-end', `${describeRun(row)} done: ${this.study.metric.kind} ${metric === null ? 'unmeasured' : metric.toFixed(3)}`);
    } else if (this.stopRequested) {
      updateStudyRun(db, row.id, { status: 'stopped', reason: STOPPED_BY_REQUEST, curve, endedAt });
    } else if (end.outcome === 'stopped') {
      updateStudyRun(db, row.id, { status: 'stopped', reason: end.reason, curve, endedAt });
      this.event('early-stop', `${describeRun(row)}: ${end.reason}`);
    } else if (end.retryable && attempts <= this.study.restarts) {
      updateStudyRun(db, row.id, { status: 'pending', reason: end.reason, curve });
      this.event('restart', `${describeRun(row)} failed (${end.reason}); it starts again (${attempts} of ${this.study.restarts + 1} attempts used)`);
    } else {
      updateStudyRun(db, row.id, { status: 'failed', reason: end.reason, curve, endedAt });
      this.event('run-end', `${describeRun(row)} failed: ${end.reason}`);
    }
    this.deps.changed();
  }

  private async runPlan(row: StudyRunRow): Promise<StudyRunPlan> {
    const parts = row.plan as unknown as RunParts;
    const files = await this.tasksOf(parts.tasks);
    const training = mergeOverrides(
      { batchTasks: 2, groupSize: 4 },
      // An arm's own training seed offsets its runs' seeds (identical arms on other seeds: a negative control).
      mergeOverrides(parts.training, { maxSteps: row.steps, seed: (parts.training.seed ?? 0) + row.seed, checkpointEvery: parts.training.checkpointEvery ?? 1 }),
    );
    return {
      dataDir: row.dir,
      source: parseModelSource(parts.model),
      training,
      script: parts.script,
      reward: parts.reward,
      trainTasks: files.tasks,
      evalTasks: files.eval,
      evalConcurrency: this.study.base.evalConcurrency,
      evalTemperature: this.study.base.evalTemperature,
      groupSize: training.groupSize!,
      batchTasks: training.batchTasks!,
    };
  }

  /** The task files of a task spec, written once per study. */
  private tasksOf(tasks: StudyTasks): Promise<TaskFiles> {
    const key = JSON.stringify(tasks);
    let files = this.taskFiles.get(key);
    if (!files) {
      const dir = join(this.deps.dir, 'tasks', String(this.taskFiles.size + 1));
      mkdirSync(dir, { recursive: true });
      files = 'file' in tasks ? splitUserTasks(dir, tasks.file) : Promise.resolve(writeCalculatorTasks(dir, { evalTasks: tasks.calculator.eval, trainTasks: tasks.calculator.train, seed: tasks.calculator.seed }));
      this.taskFiles.set(key, files);
    }
    return files;
  }

  private guardRules(): GuardRules {
    const { budget, earlyStop } = this.study;
    return {
      firstStepMs: budget.firstStepMinutes * 60_000,
      stepMs: budget.stepMinutes * 60_000,
      runWallMs: budget.runWallMinutes * 60_000,
      nanLoss: earlyStop.nanLoss,
      maxKl: earlyStop.maxKl,
      rewardCollapse: earlyStop.rewardCollapse,
      noProgressSteps: earlyStop.noProgressSteps,
    };
  }

  private baseParts(): RunParts {
    const { base } = this.study;
    return { model: base.model, script: base.script, reward: base.reward, tasks: base.tasks, training: base.training };
  }

  /** The best arm of a finished stage, by its strategy's rule (listed arms: the highest mean metric). */
  private stageBest(stage: number): PlannedArm | null {
    const rows = studyRuns(this.db, this.studyId).filter((r) => r.stage === stage);
    const from = stage > 0 && this.study.stages[stage].from === 'best' ? this.stageBest(stage - 1) : null;
    const base = this.study.stages[stage].from === 'best' && from ? from.parts : this.baseParts();
    const { strategy, arms } = this.stageStrategy(stage, base);
    const best = strategy.best(rows.map(trialOf));
    if (!best) return null;
    const row = rows.find((r) => r.arm === best.arm);
    return arms.get(best.arm) ?? (row ? { name: row.arm, params: row.params, parts: row.plan as unknown as RunParts } : null);
  }

  private event(kind: Parameters<typeof insertStudyEvent>[2], message: string): void {
    insertStudyEvent(this.db, this.studyId, kind, message);
    this.deps.log.info(message, { study: this.studyId });
  }

  private end(status: 'done' | 'failed' | 'stopped', reason: string | null): void {
    updateStudy(this.db, this.studyId, { status, reason });
    this.event(status === 'done' ? 'done' : status === 'failed' ? 'failed' : 'stop', reason ?? 'the study is done');
    this.deps.changed();
    this.deps.finished();
  }
}

/** A stage's listed arms as a strategy: every arm at the stage's steps, all at once; the best by mean metric. */
function listedArms(arms: readonly PlannedArm[], steps: number, seeds: number): SearchStrategy {
  const meanOf = (trials: readonly TrialOutcome[], arm: string) => {
    const values = trials.filter((t) => t.arm === arm && t.state === 'done' && t.metric !== null).map((t) => t.metric!);
    return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
  };
  return {
    name: 'grid',
    next: (trials) => {
      const planned = new Set(trials.map((t) => t.arm));
      const proposals = arms.filter((arm) => !planned.has(arm.name)).map((arm) => ({ arm: arm.name, params: arm.params, steps }));
      const finished = (arm: PlannedArm) => trials.filter((t) => t.arm === arm.name && (t.state === 'done' || t.state === 'failed' || t.state === 'stopped')).length >= seeds;
      return { arms: proposals, done: proposals.length === 0 && arms.every(finished) };
    },
    best: (trials) => {
      let best: { arm: string; params: Params; metric: number } | null = null;
      for (const arm of arms) {
        const metric = meanOf(trials, arm.name);
        if (metric !== null && (!best || metric > best.metric)) best = { arm: arm.name, params: arm.params, metric };
      }
      return best;
    },
  };
}

function applyArm(base: RunParts, arm: StudyArm): RunParts {
  return {
    model: arm.model ?? base.model,
    script: arm.script ?? base.script,
    reward: arm.reward ?? base.reward,
    tasks: arm.tasks ?? base.tasks,
    training: arm.training ? mergeOverrides(base.training, arm.training) : base.training,
  };
}

function trialOf(row: StudyRunRow): TrialOutcome {
  return { arm: row.arm, params: row.params, seed: row.seed, steps: row.steps, state: row.status, metric: row.status === 'done' ? row.metric : null };
}

function describeRun(row: Pick<StudyRunRow, 'arm' | 'seed' | 'steps'>): string {
  return `run ${row.arm} seed ${row.seed} (${row.steps} steps)`;
}

function safeName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

function safeCurve(dir: string): StudyRunCurve | null {
  try {
    return readRunCurve(dir);
  } catch {
    return null;
  }
}
