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
 * Hot swap: attaching under an existing name makes new episodes use the new version; in-flight episodes of the
 * old one finish (or are aborted when asked). Every run records the content hash that ran.
 */
import { EventEmitter } from 'node:events';
import { tmpdir } from 'node:os';
import type { Database } from 'better-sqlite3';
import {
  SINGLE_MODEL_ROLE,
  attachClientSchema,
  type AttachClientOptions,
  type AttachClientRequest,
  type ClientRunRecord,
  type ClientStatus,
  type RunnerEvent,
  type RunnerIsolation,
} from '../../common/runner-api.ts';
import type { Logger } from '../log.ts';
import { validate } from '../http/respond.ts';
import { clientRuns, type ClientRunsRepository, type StoredClientRun } from '../store/client-runs.ts';
import { clientScripts, type AttachmentState, type ClientScriptsRepository } from '../store/client-scripts.ts';
import { AttachedClient } from './attached-client.ts';
import { ClientNotFoundError, ModelNotHostedError, RunnerStoppedError } from './errors.ts';
import type { EpisodeApi } from './episode-api.ts';
import { runEpisode } from './episode-run.ts';
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
  private closed = false;

  constructor(private readonly options: ClientRunnerOptions) {
    this.scripts = options.db && clientScripts(options.db);
    this.runLog = options.db && clientRuns(options.db);
    this.sandbox = options.sandbox ?? hostSandbox();
    // Said once at start, where whoever runs the peer reads it: a peer without a sandbox must not look like one with.
    if (this.sandbox.isolation.kind === 'none') options.log?.warn('agent scripts are not isolated', { detail: this.sandbox.isolation.detail });
    else options.log?.info('agent scripts run sandboxed', { isolation: this.sandbox.isolation.kind });
    const context = {
      api: options.api,
      dataDir: options.dataDir,
      workRoot: options.workRoot ?? tmpdir(),
      sandbox: this.sandbox,
      log: options.log,
      record: (run: StoredClientRun) => this.record(run),
    };
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
    if (this.closed) throw new RunnerStoppedError();
    const options = validate(attachClientSchema, request);
    checkSandboxOptions(this.sandbox, options);
    const script = snapshotScript(this.options.scriptsDir, options.name, options.script, options.runtime);
    const pass = await openTaskSource(options.tasks);
    const rewardFn = options.rewardModule ? await loadRewardModule(options.rewardModule) : undefined;
    if (options.aliases.length > 0) await this.checkModelsHosted(options);
    if (this.closed) throw new RunnerStoppedError();

    const existing = this.clients.get(options.name);
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
      const stored = { ...options, script: { path: script.file } };
      this.scripts.insertVersion({ name: options.name, version: client.version, hash: script.hash, file: script.file, origin: script.origin, options: stored, attachedAt: new Date().toISOString() });
    }
    this.persist(client);
    this.options.log?.info('client attached', { name: options.name, version: client.version, hash: script.hash.slice(0, 12) });
    this.changed(client);
    this.scheduler.pump();
    return client.status();
  }

  /**
   * Aliases are extra names of the model for the script's episodes only (sent with each episode it begins), so
   * the host need not serve them. A script that hard-codes a name still depends on the model being hosted
   * somewhere: the runner asks the swarm (over the swarm protocol) so that fails at attach, not per episode.
   */
  private async checkModelsHosted(options: AttachClientOptions) {
    const { models } = await this.options.api.status(options.name);
    for (const model of Object.values(options.models ?? { [SINGLE_MODEL_ROLE]: options.model! })) {
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
    // A peer stopping right after it started has nothing to restore into (and callers fire and forget this).
    if (this.closed || !this.scripts?.open) return [];
    const restored: string[] = [];
    for (const row of this.scripts.restorable()) {
      if (this.closed) break;
      try {
        // The stored options are validated again by attach, like any request.
        await this.attach({ ...(row.options as AttachClientRequest), script: { path: row.file } });
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
    const options = { ...client.options, script: { path: client.script.file } };
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
    const runs = this.scheduler.inFlight();
    for (const run of runs) run.controller.abort({ code: 'runner_stopped', reason: 'the peer is stopping' });
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
