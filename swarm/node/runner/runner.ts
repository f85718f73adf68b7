/**
 * The client runner: runs attached agent scripts against their tasks, one child process per episode, and
 * reports each outcome to the episode API. It knows the model only by name and the episode API by URL.
 *
 * - Scheduling: a global concurrency limit, a per-script limit, and weighted fair shares between scripts (the
 *   script with the least episodes-started ÷ weight goes next).
 * - Failure: a non-zero exit, a time limit, an output-idle limit, a crash or an unparseable result aborts the
 *   episode (never trained on) with the reason; the task is retried with backoff; a script failing
 *   `maxConsecutiveFailures` times in a row is paused by the circuit breaker, which says why.
 * - Hot swap: attaching under an existing name makes new episodes use the new version; in-flight episodes of
 *   the old one finish (or are aborted when asked). Every run records the content hash that ran.
 * - Teams: a script attached with `models: {role: model}` gets one episode per role; they end or abort together.
 */
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Database } from 'better-sqlite3';
import {
  attachClientSchema,
  type AttachClientOptions,
  type AttachClientRequest,
  type ClientRunRecord,
  type ClientState,
  type ClientStatus,
  type RunnerEvent,
  type ScriptResult,
  type TaskMetrics,
} from '../../common/runner-api.ts';
import type { Logger } from '../log.ts';
import { validate } from '../http/respond.ts';
import { ClientNotFoundError, EpisodeApiError, ModelNotHostedError } from './errors.ts';
import type { BeganEpisode, EpisodeApi } from './episode-api.ts';
import { runProcess, type ProcessResult } from './process.ts';
import { loadRewardModule, parseResultLine, rewardFromModule, type Outcome, type RewardFunction } from './result.ts';
import { launchCommand, nodeRuntimeEnv, snapshotScript, type ScriptVersion } from './script.ts';
import { episodeSpecs, openTaskSource, type EpisodeSpec } from './tasks.ts';

export interface ClientRunnerOptions {
  api: EpisodeApi;
  /** The peer's data directory: scripts never get to read it. */
  dataDir: string;
  /** Where script snapshots go (`<dataDir>/scripts`). */
  scriptsDir: string;
  /** Parent of the per-episode working directories (default: the OS temp dir). */
  workRoot?: string;
  db?: Database;
  log?: Logger;
  broadcast?: (event: RunnerEvent) => void;
  /** Episodes in flight over all scripts. */
  maxConcurrency?: number;
  /** First retry delay; doubles per attempt. */
  retryBaseMs?: number;
}

/** Enough for a lab machine's cores to stay busy with agents that mostly wait on the model. */
const DEFAULT_MAX_CONCURRENCY = 64;
const DEFAULT_RETRY_BASE_MS = 500;
/** Retry delays stop growing here: a task is not worth waiting on longer than this between tries. */
const MAX_RETRY_DELAY_MS = 30_000;
/** Runs kept in memory per runner for `runs()` when there is no store. */
const MEMORY_RUNS = 2000;

interface QueuedEpisode {
  spec: EpisodeSpec;
  attempt: number;
  notBefore: number;
}

interface InFlight {
  version: number;
  controller: AbortController;
  done: Promise<void>;
}

class AttachedClient {
  state: ClientState = 'running';
  reason: string | null = null;
  version = 0;
  script!: ScriptVersion;
  options!: AttachClientOptions;
  rewardFn: RewardFunction | undefined;
  specs!: AsyncGenerator<EpisodeSpec>;
  exhausted = false;
  readonly retryQueue: QueuedEpisode[] = [];
  readonly inFlight = new Set<InFlight>();
  /** Episodes started, scaled for fair sharing (a client attached late starts at the others' level). */
  served = 0;
  counts = { started: 0, ended: 0, aborted: 0, retried: 0, consecutiveFailures: 0 };
  rewardSum = 0;
  readonly perTask = new Map<string, TaskMetrics>();
  /** The state and reason last written to the store. */
  persisted = '';

  constructor(readonly name: string) {}

  get models(): Record<string, string> {
    return this.options.models ?? { '': this.options.model! };
  }

  get hasWork(): boolean {
    return !this.exhausted || this.retryQueue.length > 0;
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
      models: this.options.models ?? { default: this.options.model! },
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

export class ClientRunner {
  private readonly clients = new Map<string, AttachedClient>();
  private readonly events = new EventEmitter<{ run: [ClientRunRecord]; change: [] }>();
  private readonly memoryRuns: ClientRunRecord[] = [];
  private readonly maxConcurrency: number;
  private readonly retryBaseMs: number;
  private readonly workRoot: string;
  private inFlightTotal = 0;
  private pumping = false;
  private pumpAgain = false;
  private wakeTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: ClientRunnerOptions) {
    this.maxConcurrency = options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY;
    this.retryBaseMs = options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
    this.workRoot = options.workRoot ?? tmpdir();
    this.events.setMaxListeners(0);
  }

  /** Attaches a script (or a new version of an attached one: hot swap). Validates everything before changing anything. */
  async attach(request: AttachClientRequest | AttachClientOptions): Promise<ClientStatus> {
    if (this.closed) throw new ClientNotFoundError('the runner is stopped');
    const options = validate(attachClientSchema, request);
    const script = snapshotScript(this.options.scriptsDir, options.name, options.script, options.runtime);
    const pass = await openTaskSource(options.tasks);
    const rewardFn = options.rewardModule ? await loadRewardModule(options.rewardModule) : undefined;
    if (options.aliases.length > 0) await this.checkModelsHosted(options);

    const existing = this.clients.get(options.name);
    const client = existing ?? new AttachedClient(options.name);
    // Versions continue across detach and restart: (name, version) stays unique in the store.
    if (!existing) client.version = this.storedVersion(options.name);
    const previousVersion = client.version;
    client.version = previousVersion + 1;
    client.script = script;
    client.options = options;
    client.rewardFn = rewardFn;
    void client.specs?.return(undefined);
    client.specs = episodeSpecs(pass, options.repeat, options.epochs);
    client.exhausted = false;
    client.retryQueue.length = 0;
    client.state = 'running';
    client.reason = null;
    client.counts.consecutiveFailures = 0;
    if (!existing) {
      const levels = [...this.clients.values()].filter((c) => c.state === 'running').map((c) => c.served / c.options.weight);
      client.served = levels.length > 0 ? Math.min(...levels) * options.weight : 0;
      this.clients.set(options.name, client);
    }
    if (existing && options.inFlight === 'abort') {
      for (const run of client.inFlight) if (run.version === previousVersion) run.controller.abort(`replaced by version ${client.version} of ${options.name}`);
    }
    this.options.db
      ?.prepare('INSERT INTO client_scripts (name, version, hash, file, origin, options, attached_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(options.name, client.version, script.hash, script.file, script.origin, JSON.stringify({ ...options, script: { path: script.file } }), new Date().toISOString());
    this.persist(client);
    this.options.log?.info('client attached', { name: options.name, version: client.version, hash: script.hash.slice(0, 12) });
    this.changed(client);
    this.pump();
    return client.status();
  }

  /**
   * Aliases are extra names of the model for the script's episodes only (sent with each episode it begins), so
   * the host need not serve them. A script that hard-codes a name still depends on the model being hosted
   * somewhere: the runner asks the swarm (over the swarm protocol) so that fails at attach, not per episode.
   */
  private async checkModelsHosted(options: AttachClientOptions) {
    const { models } = await this.options.api.status(options.name);
    for (const model of Object.values(options.models ?? { default: options.model! })) {
      if (models.some((m) => m.name === model || m.aliases.includes(model))) continue;
      const served = models.flatMap((m) => [m.name, ...m.aliases]);
      const aliases = options.aliases.map((a) => `"${a}"`).join(', ');
      throw new ModelNotHostedError(`no peer hosts the model "${model}", so the aliases ${aliases} have nothing to name; the swarm serves: ${served.join(', ') || 'no models'}`);
    }
  }

  /**
   * Re-attaches what was attached when the peer last stopped (each script's current snapshot, its options, and
   * whether it was paused). Task sources start over. A script that cannot be restored is skipped with a warning.
   */
  async restore(): Promise<string[]> {
    const db = this.options.db;
    if (!db?.open) return [];
    const rows = db.prepare("SELECT name, file, options, state, reason FROM client_attachments WHERE state IN ('running', 'paused', 'broken')").all() as {
      name: string;
      file: string;
      options: string;
      state: ClientState;
      reason: string | null;
    }[];
    const restored: string[] = [];
    for (const row of rows) {
      try {
        const options = JSON.parse(row.options) as AttachClientOptions;
        await this.attach({ ...options, script: { path: row.file } });
        if (row.state !== 'running') this.pause(row.name, row.reason ?? 'paused before the peer restarted');
        restored.push(row.name);
      } catch (err) {
        this.options.log?.warn('could not restore an attached script', { name: row.name, error: `${(err as Error).name}: ${(err as Error).message}` });
      }
    }
    return restored;
  }

  private storedVersion(name: string): number {
    const db = this.options.db;
    if (!db?.open) return 0;
    return (db.prepare('SELECT MAX(version) AS v FROM client_scripts WHERE name = ?').get(name) as { v: number | null }).v ?? 0;
  }

  private persist(client: AttachedClient, state: ClientState | 'detached' = client.state) {
    const db = this.options.db;
    if (!db?.open) return;
    // Uploaded content lives in the snapshot; the options keep only where it came from.
    const options = { ...client.options, script: { path: client.script.file } };
    db.prepare(
      `INSERT INTO client_attachments (name, version, file, options, state, reason, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, file = excluded.file, options = excluded.options,
         state = excluded.state, reason = excluded.reason, updated_at = excluded.updated_at`,
    ).run(client.name, client.version, client.script.file, JSON.stringify(options), state, client.reason, new Date().toISOString());
    client.persisted = `${state}|${client.reason}`;
  }

  list(): ClientStatus[] {
    return [...this.clients.values()].map((c) => c.status());
  }

  get(name: string): ClientStatus {
    return this.require(name).status();
  }

  pause(name: string, reason = 'paused by user'): ClientStatus {
    const client = this.require(name);
    if (client.state === 'running') this.setPaused(client, reason, false);
    return client.status();
  }

  resume(name: string): ClientStatus {
    const client = this.require(name);
    if (client.state === 'paused' || client.state === 'broken') {
      client.state = client.hasWork ? 'running' : 'finished';
      client.reason = null;
      client.counts.consecutiveFailures = 0;
      this.changed(client);
      this.pump();
    }
    return client.status();
  }

  /** Removes a script; its in-flight episodes finish, or are aborted when `abortInFlight`. */
  async detach(name: string, { abortInFlight = false } = {}): Promise<void> {
    const client = this.require(name);
    this.clients.delete(name);
    client.state = 'finished';
    this.persist(client, 'detached');
    void client.specs.return(undefined);
    if (abortInFlight) for (const run of client.inFlight) run.controller.abort(`script ${name} detached`);
    await Promise.all([...client.inFlight].map((r) => r.done));
  }

  /** The recorded runs, newest last (from the store when there is one). */
  runs(client?: string, limit = 500): ClientRunRecord[] {
    const db = this.options.db;
    if (!db?.open) return this.memoryRuns.filter((r) => client === undefined || r.client === client).slice(-limit);
    const rows = db
      .prepare(`SELECT * FROM client_runs ${client === undefined ? '' : 'WHERE client = ?'} ORDER BY id DESC LIMIT ?`)
      .all(...(client === undefined ? [limit] : [client, limit])) as RunRow[];
    return rows.reverse().map(fromRow);
  }

  onRun(listener: (record: ClientRunRecord) => void): () => void {
    this.events.on('run', listener);
    return () => this.events.off('run', listener);
  }

  /** Resolves when the named script has no work left and nothing in flight, or is paused with nothing in flight. */
  settled(name: string): Promise<ClientStatus> {
    const client = this.require(name);
    return new Promise((resolve) => {
      const check = () => {
        if (client.state === 'running' || client.inFlight.size > 0) return false;
        this.events.off('change', check);
        resolve(client.status());
        return true;
      };
      if (!check()) this.events.on('change', check);
    });
  }

  /** Stops scheduling, aborts everything in flight and waits for the processes to be gone. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.wakeTimer);
    const runs = [...this.clients.values()].flatMap((c) => [...c.inFlight]);
    for (const run of runs) run.controller.abort('the peer is stopping');
    await Promise.all(runs.map((r) => r.done));
  }

  private require(name: string): AttachedClient {
    const client = this.clients.get(name);
    if (!client) throw new ClientNotFoundError(`no attached script named "${name}"; see agentjet clients list`);
    return client;
  }

  private setPaused(client: AttachedClient, reason: string, breaker: boolean) {
    client.state = breaker ? 'broken' : 'paused';
    client.reason = reason;
    this.options.broadcast?.({ type: 'client-paused', data: { name: client.name, reason, breaker } });
    this.options.log?.warn('client paused', { name: client.name, reason });
    this.changed(client);
  }

  private changed(client: AttachedClient) {
    // The store follows state changes only (not every episode's counts).
    const persisted = `${client.state}|${client.reason}`;
    if (client.persisted !== persisted && this.clients.get(client.name) === client && !this.closed) this.persist(client);
    this.options.broadcast?.({ type: 'client', data: client.status() });
    this.events.emit('change');
  }

  /** Starts episodes while there are free slots and scripts with work; serialised, re-run when asked mid-way. */
  private pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    void this.fill().finally(() => {
      this.pumping = false;
      if (this.pumpAgain) {
        this.pumpAgain = false;
        this.pump();
      }
    });
  }

  private async fill(): Promise<void> {
    while (!this.closed && this.inFlightTotal < this.maxConcurrency) {
      const now = Date.now();
      const ready = [...this.clients.values()].filter(
        (c) => c.state === 'running' && c.inFlight.size < c.options.concurrency && (!c.exhausted || c.retryQueue.some((q) => q.notBefore <= now)),
      );
      if (ready.length === 0) break;
      // Weighted fair share: the client furthest behind its share goes next.
      const client = ready.reduce((a, b) => (b.served / b.options.weight < a.served / a.options.weight ? b : a));
      const item = await this.nextEpisode(client, now);
      if (item && (client.state !== 'running' || this.clients.get(client.name) !== client)) {
        // Paused or detached while the task source was producing: keep the task for a resume, start nothing.
        if (this.clients.get(client.name) === client) client.retryQueue.unshift({ ...item, notBefore: 0 });
        continue;
      }
      if (!item) {
        if (!client.hasWork && client.inFlight.size === 0 && client.state === 'running') {
          client.state = 'finished';
          this.changed(client);
        }
        continue;
      }
      client.served += 1;
      this.start(client, item);
    }
    this.armWake();
  }

  private async nextEpisode(client: AttachedClient, now: number): Promise<QueuedEpisode | undefined> {
    const due = client.retryQueue.findIndex((q) => q.notBefore <= now);
    if (due >= 0) return client.retryQueue.splice(due, 1)[0];
    if (client.exhausted) return undefined;
    const specs = client.specs;
    let next: IteratorResult<EpisodeSpec>;
    try {
      next = await specs.next();
    } catch (err) {
      if (client.specs === specs) {
        client.exhausted = true;
        this.setPaused(client, `task source failed: ${(err as Error).name}: ${(err as Error).message}`, true);
      }
      return undefined;
    }
    // A hot swap may have replaced the task source while we waited; this spec belongs to the old one.
    if (client.specs !== specs) return undefined;
    if (next.done) {
      client.exhausted = true;
      return undefined;
    }
    return { spec: next.value, attempt: 0, notBefore: 0 };
  }

  /** Retries waiting on their backoff wake the scheduler when due. */
  private armWake() {
    clearTimeout(this.wakeTimer);
    const times = [...this.clients.values()].filter((c) => c.state === 'running').flatMap((c) => c.retryQueue.map((q) => q.notBefore));
    if (times.length === 0 || this.closed) return;
    this.wakeTimer = setTimeout(() => this.pump(), Math.max(0, Math.min(...times) - Date.now()));
    this.wakeTimer.unref();
  }

  private start(client: AttachedClient, item: QueuedEpisode) {
    const controller = new AbortController();
    const run: InFlight = { version: client.version, controller, done: Promise.resolve() };
    client.inFlight.add(run);
    this.inFlightTotal++;
    client.counts.started++;
    run.done = this.runEpisode(client, item, controller.signal)
      .catch((err) => this.options.log?.error('runner bug', { error: String((err as Error)?.stack ?? err) }))
      .finally(() => {
        client.inFlight.delete(run);
        this.inFlightTotal--;
        if (client.state === 'running' && !client.hasWork && client.inFlight.size === 0) client.state = 'finished';
        this.changed(client);
        this.pump();
      });
  }

  private async runEpisode(client: AttachedClient, item: QueuedEpisode, signal: AbortSignal): Promise<void> {
    const { spec } = item;
    const script = client.script;
    const options = client.options;
    const startedAt = new Date().toISOString();
    const roles = Object.entries(client.models);
    const teamId = roles.length > 1 ? `team-${randomBytes(8).toString('hex')}` : undefined;
    const episodes: { role: string; episode: BeganEpisode }[] = [];
    const record = (status: 'ended' | 'aborted', reason: string | null, reward: number | null, proc?: ProcessResult) =>
      this.record({
        episodeIds: episodes.map((e) => e.episode.episodeId),
        client: client.name,
        scriptHash: script.hash,
        taskId: spec.taskId,
        kind: spec.kind,
        status,
        reason,
        reward,
        exitCode: proc?.exitCode ?? null,
        processMs: proc?.durationMs ?? null,
        stdout: proc?.stdout ?? '',
        stderr: proc?.stderr ?? '',
        startedAt,
        endedAt: new Date().toISOString(),
      });

    // 1. One episode per role (a single-model script has one role, named '').
    try {
      for (const [role, model] of roles) {
        const episode = await this.options.api.begin({
          model,
          taskId: spec.taskId,
          kind: spec.kind,
          client: client.name,
          scriptHash: script.hash,
          ...(teamId ? { teamId } : {}),
          ...(options.idleTimeoutS ? { idleTimeoutS: options.idleTimeoutS } : {}),
          ...(options.sampling && spec.kind === 'eval' ? { sampling: options.sampling } : {}),
          ...(options.aliases.length > 0 ? { aliases: options.aliases } : {}),
        });
        episodes.push({ role, episode });
      }
    } catch (err) {
      const reason = `could not start the episode: ${(err as Error).message}`;
      await this.abortAll(client.name, episodes, reason);
      record('aborted', reason, null);
      // The server being busy (draining, pool full) is not the script's fault: wait and retry, no breaker.
      if (err instanceof EpisodeApiError && err.retryable) this.requeue(client, item, false);
      else this.failed(client, item, reason);
      return;
    }

    // 2. Run the script in its own directory with only what it needs.
    const workDir = mkdtempSync(join(this.workRoot, 'agentjet-ep-'));
    let proc: ProcessResult;
    try {
      mkdirSync(join(workDir, 'home'));
      mkdirSync(join(workDir, 'tmp'));
      const env = { ...scriptEnv(workDir, spec, episodes), ...(script.runtime === 'node' ? nodeRuntimeEnv() : {}) };
      const { command, args } = launchCommand(script, { workDir, sandbox: options.sandbox, dataDir: this.options.dataDir });
      proc = await runProcess({
        command,
        args,
        cwd: workDir,
        env,
        timeLimitMs: options.timeLimitS * 1000,
        outputIdleMs: options.outputIdleS * 1000,
        signal,
      });
    } finally {
      rmSync(workDir, { recursive: true, force: true });
    }

    // 3. Judge the outcome.
    let outcome: Outcome =
      processFailure(proc, options) ??
      (client.rewardFn ? await rewardFromModule(client.rewardFn, spec.task, proc.lastLine, proc.stdout) : parseResultLine(proc.lastLine));
    const rewards = outcome.ok ? rewardsPerRole(outcome.result, roles.map(([r]) => r)) : null;
    if (outcome.ok && typeof rewards === 'string') outcome = { ok: false, reason: rewards };

    if (!outcome.ok) {
      await this.abortAll(client.name, episodes, outcome.reason);
      record('aborted', outcome.reason, null, proc);
      if (proc.killedFor === 'aborted') {
        // Aborted from outside (hot swap, detach, stop): not the script's fault, not retried.
        this.countAbort(client, spec.taskId);
        return;
      }
      this.failed(client, item, outcome.reason);
      return;
    }

    // 4. Report: every member of a team ends, or (when one cannot) all the others abort with the reason.
    const result = outcome.result;
    const map = rewards as Record<string, number>;
    const ended: typeof episodes = [];
    try {
      for (const member of episodes) {
        await this.options.api.end(client.name, member.episode.episodeId, {
          reward: map[member.role],
          ...(result.success !== undefined ? { success: result.success } : {}),
          ...(result.metrics ? { metrics: result.metrics } : {}),
        });
        ended.push(member);
      }
    } catch (err) {
      const reason = `the episode API refused the result: ${(err as Error).message}`;
      await this.abortAll(client.name, episodes.filter((e) => !ended.includes(e)), reason);
      record('aborted', reason, null, proc);
      this.countAbort(client, spec.taskId);
      return;
    }
    const reward = roles.length === 1 ? map[roles[0][0]] : mean(Object.values(map));
    record('ended', null, reward, proc);
    client.counts.ended++;
    client.counts.consecutiveFailures = 0;
    client.rewardSum += reward;
    const task = this.taskMetrics(client, spec.taskId);
    task.episodes++;
    task.rewardSum += reward;
    task.meanReward = task.rewardSum / (task.episodes - task.aborted || 1);
  }

  private taskMetrics(client: AttachedClient, taskId: string): TaskMetrics {
    let m = client.perTask.get(taskId);
    if (!m) client.perTask.set(taskId, (m = { episodes: 0, aborted: 0, rewardSum: 0, meanReward: null }));
    return m;
  }

  private countAbort(client: AttachedClient, taskId: string) {
    client.counts.aborted++;
    const task = this.taskMetrics(client, taskId);
    task.episodes++;
    task.aborted++;
  }

  /** A script failure: counted, retried with backoff while attempts remain, and the breaker checked. */
  private failed(client: AttachedClient, item: QueuedEpisode, reason: string) {
    this.countAbort(client, item.spec.taskId);
    client.counts.consecutiveFailures++;
    if (item.attempt < client.options.retries) this.requeue(client, item, true);
    if (client.state === 'running' && client.counts.consecutiveFailures >= client.options.maxConsecutiveFailures) {
      this.setPaused(client, `circuit breaker: ${client.counts.consecutiveFailures} episodes failed in a row; last: ${reason}`, true);
    }
  }

  private requeue(client: AttachedClient, item: QueuedEpisode, countAttempt: boolean) {
    const attempt = countAttempt ? item.attempt + 1 : item.attempt;
    const delay = Math.min(MAX_RETRY_DELAY_MS, this.retryBaseMs * 2 ** Math.max(0, attempt - 1));
    if (countAttempt) client.counts.retried++;
    client.retryQueue.push({ spec: item.spec, attempt, notBefore: Date.now() + delay });
  }

  private async abortAll(client: string, episodes: { episode: BeganEpisode }[], reason: string) {
    const results = await Promise.allSettled(episodes.map((e) => this.options.api.abort(client, e.episode.episodeId, reason.slice(0, 2000))));
    for (const r of results) if (r.status === 'rejected') this.options.log?.warn('abort refused', { client, error: String(r.reason) });
  }

  private record(record: ClientRunRecord) {
    const db = this.options.db;
    if (db?.open) {
      db.prepare(
        `INSERT INTO client_runs (client, script_hash, episode_ids, task_id, kind, status, reason, reward, exit_code, process_ms, stdout, stderr, started_at, ended_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        record.client,
        record.scriptHash,
        JSON.stringify(record.episodeIds),
        record.taskId,
        record.kind,
        record.status,
        record.reason,
        record.reward,
        record.exitCode,
        record.processMs,
        record.stdout,
        record.stderr,
        record.startedAt,
        record.endedAt,
      );
    } else {
      this.memoryRuns.push(record);
      if (this.memoryRuns.length > MEMORY_RUNS) this.memoryRuns.shift();
    }
    this.events.emit('run', record);
  }
}

/** What a failed process means, in words; undefined when it exited 0 on its own. */
function processFailure(proc: ProcessResult, options: AttachClientOptions): Outcome | undefined {
  if (proc.spawnError) return { ok: false, reason: `could not start the script: ${proc.spawnError}` };
  if (proc.killedFor === 'time-limit') return { ok: false, reason: `time limit of ${options.timeLimitS} s exceeded; the process tree was killed` };
  if (proc.killedFor === 'output-idle') return { ok: false, reason: `no output for ${options.outputIdleS} s; the process tree was killed` };
  if (proc.killedFor === 'aborted') return { ok: false, reason: `aborted: ${proc.abortReason}` };
  if (proc.signal) return { ok: false, reason: `the script crashed (killed by ${proc.signal})${lastErrorLine(proc)}` };
  if (proc.exitCode !== 0) return { ok: false, reason: `the script exited with code ${proc.exitCode}${lastErrorLine(proc)}` };
  return undefined;
}

function lastErrorLine(proc: ProcessResult): string {
  const line = proc.stderr.trim().split('\n').at(-1)?.trim();
  return line ? `: ${line.slice(0, 300)}` : '';
}

/** The reward of each role, or why the result does not give one for every role. */
function rewardsPerRole(result: ScriptResult, roles: string[]): Record<string, number> | string {
  if ('reward' in result) return Object.fromEntries(roles.map((r) => [r, result.reward]));
  if (roles.length === 1 && roles[0] === '') return 'no result: a single-model script reports {"reward": n}, not "rewards"';
  const missing = roles.filter((r) => !(r in result.rewards));
  if (missing.length > 0) return `no result: "rewards" has no reward for role ${missing.map((m) => `"${m}"`).join(', ')}`;
  return Object.fromEntries(roles.map((r) => [r, result.rewards[r]]));
}

function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/**
 * The script's whole environment: PATH and LANG from the peer, a private HOME and TMPDIR inside its work dir,
 * and its episode's AGENTJET_/OPENAI_ variables. Nothing else of the peer's environment passes.
 */
export function scriptEnv(workDir: string, spec: EpisodeSpec, episodes: { role: string; episode: BeganEpisode }[]): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    LANG: process.env.LANG ?? 'C.UTF-8',
    HOME: join(workDir, 'home'),
    TMPDIR: join(workDir, 'tmp'),
    PYTHONUNBUFFERED: '1',
    PYTHONDONTWRITEBYTECODE: '1',
    AGENTJET_TASK: JSON.stringify(spec.task),
    AGENTJET_TASK_ID: spec.taskId,
    AGENTJET_EPISODE_KIND: spec.kind,
  };
  for (const { role, episode } of episodes) {
    const suffix = role === '' ? '' : `_${role.toUpperCase()}`;
    env[`OPENAI_BASE_URL${suffix}`] = episode.baseUrl;
    env[`OPENAI_API_KEY${suffix}`] = episode.apiKey;
    env[`AGENTJET_MODEL${suffix}`] = episode.model;
    env[`AGENTJET_EPISODE_ID${suffix}`] = episode.episodeId;
  }
  if (episodes.length > 1) env.AGENTJET_ROLES = episodes.map((e) => e.role).join(',');
  return env;
}

interface RunRow {
  client: string;
  script_hash: string;
  episode_ids: string;
  task_id: string;
  kind: 'train' | 'eval';
  status: 'ended' | 'aborted';
  reason: string | null;
  reward: number | null;
  exit_code: number | null;
  process_ms: number | null;
  stdout: string;
  stderr: string;
  started_at: string;
  ended_at: string;
}

function fromRow(row: RunRow): ClientRunRecord {
  return {
    episodeIds: JSON.parse(row.episode_ids) as string[],
    client: row.client,
    scriptHash: row.script_hash,
    taskId: row.task_id,
    kind: row.kind,
    status: row.status,
    reason: row.reason,
    reward: row.reward,
    exitCode: row.exit_code,
    processMs: row.process_ms,
    stdout: row.stdout,
    stderr: row.stderr,
    startedAt: row.started_at,
    endedAt: row.ended_at,
  };
}
