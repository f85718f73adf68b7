/**
 * One attached script as the runner holds it: its current version (hot swap replaces the version, the options
 * and the task source in place, so counts, fair-share level and in-flight runs carry over), its queue of tasks
 * waiting on a retry or on a busy server, its runs in flight, and its counts and per-task metrics.
 */
import { SINGLE_MODEL_ROLE, type AttachClientOptions, type ClientState, type ClientStatus, type TaskMetrics } from '../../common/runner-api.ts';
import type { RewardFunction } from './result.ts';
import type { ScriptVersion } from './script.ts';
import type { Task } from '../../common/runner-api.ts';
import type { EpisodeSpec } from './tasks.ts';

/** Held-out tasks the runner keeps for evals every N steps: a task file's split, not an endless generator's. */
const MAX_HELD_OUT_TASKS = 10_000;

/** A task waiting to run: a retry (after its backoff) or one a busy server refused to start. */
export interface QueuedEpisode {
  spec: EpisodeSpec;
  /** Failed tries so far (refused starts do not count). */
  attempt: number;
  /** Not before this time (ms since the epoch). */
  notBefore: number;
  /** Its place in the task source's order: queued tasks stay in that order. */
  order: number;
}

export interface InFlight {
  /** The script version it runs. */
  version: number;
  controller: AbortController;
  done: Promise<void>;
}

/** What a new version brings; the rest of the client carries over. */
export interface ClientVersion {
  version: number;
  script: ScriptVersion;
  options: AttachClientOptions;
  rewardFn: RewardFunction | undefined;
  specs: AsyncGenerator<EpisodeSpec>;
}

export class AttachedClient {
  state: ClientState = 'running';
  reason: string | null = null;
  version = 0;
  script!: ScriptVersion;
  options!: AttachClientOptions;
  rewardFn: RewardFunction | undefined;
  specs!: AsyncGenerator<EpisodeSpec>;
  exhausted = false;
  /** Tasks taken from the task source but not running now, in task-source order. */
  readonly queue: QueuedEpisode[] = [];
  /** The order the next task taken from the task source gets. */
  nextOrder = 0;
  readonly inFlight = new Set<InFlight>();
  /** Episodes started, scaled for fair sharing (a client attached late starts at the others' level). */
  served = 0;
  /** A busy server asked to wait: nothing of this client starts before this time (ms since the epoch). */
  heldUntil = 0;
  /**
   * After a refused start, one start at a time until one is accepted: a server that is still busy sees one
   * request per Retry-After from this client, not one per slot.
   */
  probing = false;
  readonly counts = { started: 0, ended: 0, aborted: 0, retried: 0, consecutiveFailures: 0 };
  rewardSum = 0;
  readonly perTask = new Map<string, TaskMetrics>();
  /** The state and reason last written to the store. */
  persisted = '';
  /** Held-out tasks seen in the task source, by id: run on every `evalEvery`th step's weights when the server asks. */
  readonly heldOut = new Map<string, Task>();
  /** The server's eval interval (steps), from the last episode start; 0: once per pass. */
  evalEvery = 0;
  /** The last step bucket (step ÷ evalEvery) whose evals were queued; -1 before any. */
  private evalBucket = -1;
  private evalSeq = 0;

  constructor(readonly name: string) {}

  /** Hot swap: the new version's script, options and task source; queued tasks of the old one are dropped. */
  install(next: ClientVersion): void {
    void this.specs?.return(undefined);
    this.version = next.version;
    this.script = next.script;
    this.options = next.options;
    this.rewardFn = next.rewardFn;
    this.specs = next.specs;
    this.exhausted = false;
    this.queue.length = 0;
    this.heldUntil = 0;
    this.probing = false;
    this.state = 'running';
    this.reason = null;
    this.counts.consecutiveFailures = 0;
    this.heldOut.clear();
  }

  /** A held-out task from the task source; true when evals every N steps take care of it (the pass skips it). */
  noteHeldOut(task: Task): boolean {
    const id = String(task.id);
    const known = this.heldOut.has(id);
    if (!known && this.heldOut.size < MAX_HELD_OUT_TASKS) this.heldOut.set(id, task);
    // Seen after this bucket's evals were queued: it runs on the same weights as the others.
    if (!known && this.evalEvery > 0 && this.evalBucket >= 0) this.queueEvals([task]);
    return this.evalEvery > 0 && this.heldOut.has(id);
  }

  /**
   * An episode started at the server's `step`, which asks for evals every `evalEvery` steps: when the step enters a
   * new bucket, every held-out task is queued ahead of the train tasks, once.
   */
  serverAt(step: number | undefined, evalEvery: number | undefined): void {
    this.evalEvery = evalEvery ?? 0;
    if (this.evalEvery <= 0 || step === undefined) return;
    const bucket = Math.floor(step / this.evalEvery);
    if (bucket <= this.evalBucket) return;
    this.evalBucket = bucket;
    this.queueEvals([...this.heldOut.values()]);
  }

  private queueEvals(tasks: readonly Task[]): void {
    // Orders below any task-source order, rising: evals run first, in the order they were queued.
    const items = tasks.map((task) => ({ spec: { task, taskId: String(task.id), kind: 'eval' as const }, attempt: 0, notBefore: 0, order: Number.MIN_SAFE_INTEGER + this.evalSeq++ }));
    const firstTrain = this.queue.findIndex((q) => q.order > Number.MIN_SAFE_INTEGER + this.evalSeq);
    this.queue.splice(firstTrain < 0 ? this.queue.length : firstTrain, 0, ...items);
  }

  /** Role → model; a single-model script has one role, SINGLE_MODEL_ROLE. */
  get models(): Record<string, string> {
    return this.options.models ?? { [SINGLE_MODEL_ROLE]: this.options.model! };
  }

  get isTeam(): boolean {
    return this.options.models !== undefined;
  }

  get hasWork(): boolean {
    return !this.exhausted || this.queue.length > 0;
  }

  /** Its share so far: episodes started per unit of weight. */
  get level(): number {
    return this.served / this.options.weight;
  }

  taskMetrics(taskId: string): TaskMetrics {
    let m = this.perTask.get(taskId);
    if (!m) this.perTask.set(taskId, (m = { episodes: 0, aborted: 0, rewardSum: 0, meanReward: null }));
    return m;
  }

  countEnded(taskId: string, reward: number): void {
    this.counts.ended++;
    this.counts.consecutiveFailures = 0;
    this.rewardSum += reward;
    const task = this.taskMetrics(taskId);
    task.episodes++;
    task.rewardSum += reward;
    task.meanReward = task.rewardSum / (task.episodes - task.aborted || 1);
  }

  countAborted(taskId: string): void {
    this.counts.aborted++;
    const task = this.taskMetrics(taskId);
    task.episodes++;
    task.aborted++;
  }

  status(): ClientStatus {
    const perTask: Record<string, TaskMetrics> = {};
    for (const [id, m] of this.perTask) perTask[id] = { ...m };
    return {
      name: this.name,
      state: this.state,
      reason: this.reason,
      version: this.version,
      scriptHash: this.script.hash,
      scriptFile: this.script.origin,
      runtime: this.script.runtime,
      models: this.models,
      weight: this.options.weight,
      concurrency: this.options.concurrency,
      repeat: this.options.repeat,
      inFlight: this.inFlight.size,
      counts: { ...this.counts },
      meanReward: this.counts.ended > 0 ? this.rewardSum / this.counts.ended : null,
      perTask,
    };
  }
}
