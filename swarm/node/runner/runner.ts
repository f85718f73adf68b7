/**
 * The client runner: runs attached agent scripts against their tasks, one child process per episode, and
 * reports each outcome to the episode API. It knows the model only by name and the episode API by URL.
 *
 * This file is the runner's face (attach, detach, pause, resume, runs, restore, close) and its bookkeeping of
 * versions and the store. The parts, one job each:
 *   scheduler.ts        which run starts next: fair shares, retries with backoff, circuit breaker, back-pressure
 *   episode-run.ts      one run: begin the episodes, run the process, judge it, end or abort, record
 *   attached-client.ts  one attached script: its version (hot swap), queue, runs in flight, counts
 *   environment.ts      a run's work directory and environment
 *   result.ts           what a finished process and its result line mean
 *   attach-checks.ts    refused at attach: a model nobody hosts, a script from another folder under a taken name
 *   dry-run.ts          one episode of the first train task, answered with its run and calls, nothing attached
 * Hot swap: attaching under an existing name makes new episodes use the new version; in-flight episodes of the
 * old one finish (or are aborted when asked). Every run records the content hash that ran.
 */
import { EventEmitter } from 'node:events';
import { tmpdir } from 'node:os';
import type { Database } from 'better-sqlite3';
import {
  attachClientSchema,
  type AttachClientOptions,
  type AttachClientRequest,
  type ClientRunRecord,
  type ClientStatus,
  type DryRunCall,
  type DryRunResult,
  type RunnerEvent,
  type RunnerIsolation,
} from '../../common/runner-api.ts';
import type { Logger } from '../log.ts';
import { validate } from '../http/respond.ts';
import { clientRuns, type ClientRunsRepository, type StoredClientRun } from '../store/client-runs.ts';
import { clientScripts, type AttachmentState, type ClientScriptsRepository } from '../store/client-scripts.ts';
import { AttachedClient } from './attached-client.ts';
import { UNKNOWN_ORIGIN, checkModelsHosted, checkSameOrigin } from './attach-checks.ts';
import { runDryRun, type DryRunVersion } from './dry-run.ts';
import { ClientNotFoundError, RunnerStoppedError } from './errors.ts';
import type { EpisodeApi } from './episode-api.ts';
import { runEpisode, type EpisodeRunContext } from './episode-run.ts';
import { forkCopiesParent, ProcessLauncher } from './launcher.ts';
import { loadRewardModule } from './result.ts';
import { DEFAULT_MAX_CONCURRENCY, DEFAULT_REFUSED_WAIT_MS, DEFAULT_RETRY_BASE_MS, Scheduler } from './scheduler.ts';
import { checkSandboxOptions, hostSandbox, type Sandbox } from './sandbox.ts';
import { snapshotScript } from './script.ts';
import { episodeSpecs, openTaskSource } from './tasks.ts';

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
  /** How long a start refused without Retry-After (or an unreachable server) waits. */
  refusedWaitMs?: number;
  /** How scripts are isolated (default: this machine's best, bubblewrap where it works; see sandbox.ts). */
  sandbox?: Sandbox;
  /** A dry run's episode calls (from the store's read model); without it a dry run answers no calls. */
  readCalls?: (episodeId: string) => DryRunCall[];
  /**
   * Start agents from a launcher process (launcher.ts) rather than from the peer; default: where a spawn forks the
   * spawner (Linux).
   */
  launcher?: boolean;
}

/** Runs kept in memory per runner for `runs()` when there is no store. */
const MEMORY_RUNS = 2000;
/** `runs()` answers at most this many unless asked for fewer. */
const DEFAULT_RUNS_LIMIT = 500;

export class ClientRunner {
  private readonly events = new EventEmitter<{ run: [ClientRunRecord]; change: [] }>();
  private readonly memoryRuns: StoredClientRun[] = [];
  private readonly scheduler: Scheduler;
  private readonly scripts: ClientScriptsRepository | undefined;
  private readonly runLog: ClientRunsRepository | undefined;
  private readonly sandbox: Sandbox;
  private readonly runContext: EpisodeRunContext;
  private readonly dryRuns = new Set<AbortController>();
  private readonly launcher: ProcessLauncher | undefined;
  private closed = false;

  constructor(private readonly options: ClientRunnerOptions) {
    this.scripts = options.db && clientScripts(options.db);
    this.runLog = options.db && clientRuns(options.db);
    this.sandbox = options.sandbox ?? hostSandbox();
    // Said once at start, where whoever runs the peer reads it: a peer without a sandbox must not look like one with.
    if (this.sandbox.isolation.kind === 'none') options.log?.warn('agent scripts are not isolated', { detail: this.sandbox.isolation.detail });
    else options.log?.info('agent scripts run sandboxed', { isolation: this.sandbox.isolation.kind });
    const context: EpisodeRunContext = {
      api: options.api,
      dataDir: options.dataDir,
      workRoot: options.workRoot ?? tmpdir(),
      sandbox: this.sandbox,
      log: options.log,
      record: (run: StoredClientRun) => this.record(run),
    };
    if (options.launcher ?? forkCopiesParent()) {
      const launcher = new ProcessLauncher();
      this.launcher = launcher;
      context.launch = (spec) => launcher.run(spec);
    }
    this.runContext = context;
    this.scheduler = new Scheduler({
      maxConcurrency: options.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY,
      retryBaseMs: options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS,
      refusedWaitMs: options.refusedWaitMs ?? DEFAULT_REFUSED_WAIT_MS,
      log: options.log,
      run: (client, spec, signal, onStarted) => runEpisode(context, client, spec, signal, onStarted),
      changed: (client) => this.changed(client),
      pause: (client, reason, breaker) => this.setPaused(client, reason, breaker),
    });
    this.events.setMaxListeners(0);
  }

  private get clients(): Map<string, AttachedClient> {
    return this.scheduler.clients;
  }

  /** Attaches a script (or a new version of an attached one: hot swap). Validates everything before changing anything. */
  async attach(request: AttachClientRequest | AttachClientOptions): Promise<ClientStatus> {
    return (await this.attachOrDryRun(request, { checkModels: true })) as ClientStatus;
  }

  /**
   * Like attach, and a request with `dryRun: true` runs one episode instead (answering a DryRunResult). Restores
   * skip the model check: what was accepted before stays attached while its model is away (back-pressure waits).
   */
  async attachOrDryRun(
    request: AttachClientRequest | AttachClientOptions,
    { checkModels = true, origin }: { checkModels?: boolean; origin?: string } = {},
  ): Promise<ClientStatus | DryRunResult> {
    if (this.closed) throw new RunnerStoppedError();
    const options = validate(attachClientSchema, request);
    checkSandboxOptions(this.sandbox, options);
    const existing = this.clients.get(options.name);
    // A dry run is snapshotted apart from the attached versions: it changes nothing of the client of that name.
    const snapshot = snapshotScript(this.options.scriptsDir, options.dryRun ? `${options.name}.dry-run` : options.name, options.script, options.runtime, { bundle: options.bundle });
    const script = origin ? { ...snapshot, origin } : snapshot;
    if (existing && !options.dryRun && !options.swap) checkSameOrigin(options.name, existing.script.origin, script.origin);
    const pass = await openTaskSource(options.tasks);
    const rewardFn = options.rewardModule ? await loadRewardModule(options.rewardModule) : undefined;
    if (checkModels) await checkModelsHosted(this.options.api, options, this.options.log);
    if (this.closed) throw new RunnerStoppedError();
    if (options.dryRun) return this.dryRun({ options, script, rewardFn, pass });

    const client = existing ?? new AttachedClient(options.name);
    // Versions continue across detach and restart: (name, version) stays unique in the store.
    const previousVersion = existing ? client.version : this.storedVersion(options.name);
    client.install({ version: previousVersion + 1, script, options, rewardFn, specs: episodeSpecs(pass, options.repeat, options.epochs, (task) => client.noteHeldOut(task)) });
    if (!existing) this.scheduler.add(client);
    if (existing && options.inFlight === 'abort') {
      const abort = { code: 'replaced' as const, reason: `replaced by version ${client.version} of ${options.name}` };
      for (const run of client.inFlight) if (run.version === previousVersion) run.controller.abort(abort);
    }
    if (this.scripts?.open) {
      // Uploaded content lives in the snapshot; the options keep only where it came from.
      const stored = { ...options, script: { path: script.file }, origin: script.origin };
      this.scripts.insertVersion({ name: options.name, version: client.version, hash: script.hash, file: script.file, origin: script.origin, options: stored, attachedAt: new Date().toISOString() });
    }
    this.persist(client);
    this.options.log?.info('client attached', { name: options.name, version: client.version, hash: script.hash.slice(0, 12) });
    this.changed(client);
    this.scheduler.pump();
    return client.status();
  }

  /** One episode of the first train task, outside the scheduler and the attachments (see dry-run.ts). */
  private async dryRun(version: DryRunVersion): Promise<DryRunResult> {
    const controller = new AbortController();
    this.dryRuns.add(controller);
    try {
      return await runDryRun(this.runContext, version, controller.signal, this.options.readCalls);
    } finally {
      this.dryRuns.delete(controller);
    }
  }

  /**
   * Re-attaches what was attached when the peer last stopped (each script's current snapshot, its options, and
   * whether it was paused). Task sources start over. A script that cannot be restored is skipped with a warning.
   */
  async restore(): Promise<string[]> {
    // A peer stopping right after it started has nothing to restore into (and callers fire and forget this).
    if (this.closed || !this.scripts?.open) return [];
    const restored: string[] = [];
    for (const row of this.scripts.restorable()) {
      if (this.closed) break;
      try {
        // The stored options are validated again by attach, like any request.
        // The origin kept beside the options (not part of the request schema) keeps the swap check true after a restart.
        const { origin, ...options } = row.options as AttachClientRequest & { origin?: string };
        await this.attachOrDryRun({ ...options, script: { path: row.file }, dryRun: false }, { checkModels: false, origin: origin ?? UNKNOWN_ORIGIN });
        if (row.state !== 'running') this.pause(row.name, row.reason ?? 'paused before the peer restarted');
        restored.push(row.name);
      } catch (err) {
        this.options.log?.warn('could not restore an attached script', { name: row.name, error: `${(err as Error).name}: ${(err as Error).message}` });
      }
    }
    return restored;
  }

  private storedVersion(name: string): number {
    return this.scripts?.open ? this.scripts.latestVersion(name) : 0;
  }

  private persist(client: AttachedClient, state: AttachmentState = client.state) {
    client.persisted = `${state}|${client.reason}`;
    if (!this.scripts?.open) return;
    const options = { ...client.options, script: { path: client.script.file }, origin: client.script.origin };
    this.scripts.saveAttachment({ name: client.name, version: client.version, file: client.script.file, options, state, reason: client.reason, updatedAt: new Date().toISOString() });
  }

  /** How scripts are isolated here, for the peer's status (`StatusPayload.isolation`). */
  isolation(): RunnerIsolation {
    return this.sandbox.isolation;
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
    if (this.closed) throw new RunnerStoppedError();
    const client = this.require(name);
    if (client.state === 'paused' || client.state === 'broken') {
      client.state = client.hasWork ? 'running' : 'finished';
      client.reason = null;
      client.counts.consecutiveFailures = 0;
      this.changed(client);
      this.scheduler.pump();
    }
    return client.status();
  }

  /** Removes a script; its in-flight episodes finish, or are aborted when `abortInFlight`. */
  async detach(name: string, { abortInFlight = false } = {}): Promise<void> {
    const client = this.require(name);
    this.clients.delete(name);
    client.state = 'finished';
    this.persist(client, 'detached');
    this.options.broadcast?.({ type: 'client-detached', data: { name } });
    void client.specs.return(undefined);
    if (abortInFlight) for (const run of client.inFlight) run.controller.abort({ code: 'detached', reason: `script ${name} detached` });
    await Promise.all([...client.inFlight].map((r) => r.done));
  }

  /** The recorded runs, newest last (from the store when there is one). */
  runs(client?: string, limit = DEFAULT_RUNS_LIMIT): ClientRunRecord[] {
    if (this.runLog?.open) return this.runLog.latest(client, limit);
    return this.memoryRuns.filter((r) => client === undefined || r.client === client).slice(-limit);
  }

  onRun(listener: (record: ClientRunRecord) => void): () => void {
    this.events.on('run', listener);
    return () => this.events.off('run', listener);
  }

  /** Calls `listener` whenever a client's state or counts change (attach, start, finish, pause …). */
  onChange(listener: () => void): () => void {
    this.events.on('change', listener);
    return () => this.events.off('change', listener);
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
    this.scheduler.close();
    for (const dry of this.dryRuns) dry.abort({ code: 'runner_stopped', reason: 'the peer is stopping' });
    const runs = this.scheduler.inFlight();
    for (const run of runs) run.controller.abort({ code: 'runner_stopped', reason: 'the peer is stopping' });
    await Promise.all(runs.map((r) => r.done));
    await this.launcher?.close();
  }

  private require(name: string): AttachedClient {
    const client = this.clients.get(name);
    if (!client) throw new ClientNotFoundError(`no attached client named "${name}"; \`agentjet clients list\` lists them`);
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
    if (client.persisted !== persisted && this.scheduler.isAttached(client) && !this.closed) this.persist(client);
    this.options.broadcast?.({ type: 'client', data: client.status() });
    this.events.emit('change');
  }

  private record(run: StoredClientRun) {
    if (this.runLog?.open) this.runLog.insert(run);
    else {
      this.memoryRuns.push(run);
      if (this.memoryRuns.length > MEMORY_RUNS) this.memoryRuns.shift();
    }
    this.events.emit('run', run);
  }
}
