/**
 * The peer runtime's composition root: one per process (headless `agentjet node`, or the child of the Electron
 * shell). It owns the data directory, the store, the HTTP server (UI, control API, swarm protocol, gateway)
 * and the event hub, and closes all of them on stop(), safely twice.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Database } from 'better-sqlite3';
import type { Role, StatusPayload } from '../common/api.ts';
import { cleanStaleTempFiles, writeFileAtomic } from './atomic-file.ts';
import { EventHub } from './control/events.ts';
import { ControlRouter, createControlRouter, LayeredRouter } from './control/routes.ts';
import { SwarmMembershipManager } from './control/swarm-membership.ts';
import { addUiRoutes } from './control/ui-routes.ts';
import { createHttpServer, listen } from './http/server.ts';
import { loadOrCreateIdentity, type NodeIdentity } from './identity.ts';
import { createLogger, type Logger, type LogLevel } from './log.ts';
import { DEFAULT_POOL_LIMIT, type HostedModelSpec } from './models/model-host.ts';
import { startServing, type Serving, type ServingInit } from './models/serving.ts';
import type { P2pService } from './p2p/service.ts';
import type { P2pOptions } from './p2p/settings.ts';
import { dataPaths, type DataPaths } from './paths.ts';
import type { ClientRunner } from './runner/runner.ts';
import { startClientRunner } from './runner/service.ts';
import { startResearchService, type ResearchService } from './research/service.ts';
import { RUN_MODEL } from './research/study-run.ts';
import { PlannerError } from './research/llm-planner.ts';
import { NotListeningError, ServiceSet, type PeerContext, type PeerUrls } from './services.ts';
import { openStore, schemaVersion } from './store/db.ts';
import { abortOrphanedEpisodes } from './store/episode-recovery.ts';
import { countEpisodes, recordPeerStart, recordPeerStop } from './store/peer-starts.ts';
import { defaultTrainingConfig, mergeOverrides, parseTrainingOverrides, resolveTrainingConfig, samplesSeparately, type TrainingConfig } from './training/config.ts';
import type { ModelSource } from '../../worker/common/engine.ts';
import { startTrainingService, type TrainingService } from './training/service.ts';
import { sqliteTrainingStore } from './training/sqlite-training-store.ts';
import { APP_VERSION } from './version.ts';

export type { PeerUrls } from './services.ts';

export const DEFAULT_PORT = 8470;
export const DEFAULT_HOST = '127.0.0.1';

export interface PeerOptions {
  dataDir: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  roles?: Role[];
  consoleLogLevel?: LogLevel | 'silent';
  /** The built UI; defaults to renderer/dist of this checkout. */
  uiRoot?: string;
  /** Models to host (swarm server role); see models/model-spec.ts for how CLI and config files make these. */
  models?: HostedModelSpec[];
  /** Tests and benchmarks may start engines in-process instead of in worker threads. */
  startEngine?: ServingInit['startEngine'];
  /** Training-loop settings for every hosted model (training/config.ts documents them and their defaults). */
  training?: {
    config?: unknown;
    perModel?: Record<string, unknown>;
    autoStart?: boolean;
    /** Start a new run of every model from its source weights (`--new-run`), and the name for new runs. */
    run?: { fresh?: boolean; name?: string };
  };
  /** The swarm over libp2p; off unless a swarm token is given here or stored by `agentjet swarm join`. */
  p2p?: P2pOptions;
}

export class PeerRuntime {
  readonly startedAt = new Date();
  /** Handed to the UI and the CLI; a new one every start. */
  readonly token = randomBytes(24).toString('base64url');
  readonly startId = randomBytes(8).toString('hex');
  readonly events: EventHub;
  /** What every service is given (services.ts). */
  readonly context: PeerContext;
  private readonly services: ServiceSet;
  private listening: PeerUrls | undefined;
  port = 0;
  /** Hosted models, episodes and the gateway. */
  serving!: Serving;
  /** One GRPO training loop per hosted model. */
  training!: TrainingService;
  /** Attached agent scripts (swarm client role), run against episodes of the swarm protocol. */
  runner!: ClientRunner;
  research!: ResearchService;
  /** Whether this peer is in a swarm; create / join / leave at runtime (control/swarm-membership.ts). */
  swarm!: SwarmMembershipManager;
  private stopping: Promise<void> | undefined;
  private server: Server | undefined;

  private constructor(
    readonly options: Required<Omit<PeerOptions, 'uiRoot' | 'models' | 'startEngine' | 'training' | 'p2p'>> & { uiRoot: string },
    readonly paths: DataPaths,
    readonly identity: NodeIdentity,
    readonly db: Database,
    readonly log: Logger,
  ) {
    this.events = new EventHub(this.token, () => this.status());
    this.services = new ServiceSet(log);
    this.context = {
      db,
      log,
      paths,
      identity,
      roles: options.roles,
      controlToken: this.token,
      publish: (event) => this.events.broadcast(event),
      statusChanged: () => this.events.broadcast({ type: 'status', data: this.status() }),
      urls: () => {
        if (!this.listening) throw new NotListeningError();
        return this.listening;
      },
    };
    log.onEntry((entry) => {
      if (entry.level !== 'debug') this.events.broadcast({ type: 'log', data: { level: entry.level, msg: entry.msg, time: entry.time } });
    });
  }

  get urls(): PeerUrls {
    return this.context.urls();
  }

  /** The libp2p node and swarm relays; undefined while this peer is in no swarm. */
  get p2p(): P2pService | undefined {
    return this.swarm?.service;
  }

  static async start(options: PeerOptions): Promise<PeerRuntime> {
    const paths = dataPaths(options.dataDir);
    mkdirSync(paths.dataDir, { recursive: true });
    // A start that died half way (a full disk, a kill) may have left temporary files of its atomic writes.
    cleanStaleTempFiles(paths.dataDir, ['control.json', 'identity.json']);
    const log = createLogger({ dir: paths.logs, consoleLevel: options.consoleLogLevel ?? 'info' });
    const identity = loadOrCreateIdentity(paths.identity);
    const db = openStore(paths.store);
    // Episodes left active by a peer that died cannot finish (their agents and keys are gone): never trained on.
    const orphans = abortOrphanedEpisodes(db);
    if (orphans.length > 0) log.warn('aborted episodes left active by the previous run', { episodes: orphans.length });
    const resolved = {
      dataDir: paths.dataDir,
      host: options.host ?? DEFAULT_HOST,
      port: options.port ?? DEFAULT_PORT,
      roles: options.roles ?? (['server', 'client'] as Role[]),
      consoleLogLevel: options.consoleLogLevel ?? 'info',
      uiRoot: options.uiRoot ?? fileURLToPath(new URL('../../renderer/dist', import.meta.url)),
    };
    const runtime = new PeerRuntime(resolved, paths, identity, db, log);
    try {
      await runtime.startServices(options);
      await runtime.listen();
      // Scripts attached before the last stop start again once the swarm protocol answers.
      void runtime.runner.restore();
    } catch (err) {
      await runtime.stop();
      throw err;
    }
    return runtime;
  }

  /** The services this peer runs, in start order; stop() closes them in reverse. */
  private async startServices(options: PeerOptions) {
    const ctx = this.context;
    const services = this.services;
    const trainingConfigOf = trainingConfigs(options);
    services.add({ name: 'status', routes: createControlRouter(this.token, () => this.status()), close: async () => {} });
    this.serving = services.add(
      await startServing(ctx, {
        // The engine starts with the run's LoRA settings, seed and sampler placement: fixed once it holds weights.
        models: (options.models ?? []).map((spec) => {
          const config = trainingConfigOf(spec.name);
          return { ...spec, engine: { lora: config.lora, seed: config.seed, separateSampler: samplesSeparately(config) } };
        }),
        startEngine: options.startEngine,
        mergeModeOf: (model) => trainingConfigOf(model).mergeMode,
        // Read at each episode start, so a live change of the setting reaches the runners.
        evalEveryOf: (model) => this.training?.loops.get(model)?.settings.evalEvery ?? trainingConfigOf(model).evalEvery,
      }),
    );
    const uiRoutes = new ControlRouter(this.token);
    addUiRoutes(uiRoutes, this.db, this.serving.models);
    services.add({ name: 'ui-reads', routes: uiRoutes, close: async () => {} });
    this.training = services.add(
      await startTrainingService(ctx, {
        host: this.serving.models,
        store: sqliteTrainingStore(this.db),
        configOf: trainingConfigOf,
        autoStart: options.training?.autoStart,
        sourceOf: (model) => modelSourceText(this.serving.models.find(model)?.source),
        run: options.training?.run,
      }),
    );
    this.runner = services.add(startClientRunner(ctx)).runner;
    this.research = services.add(
      startResearchService(ctx, {
        // A study's runs each train on a peer of their own (own data dir, store and engine), in this process.
        startPeer: (run) =>
          PeerRuntime.start({
            dataDir: run.dataDir,
            port: 0,
            consoleLogLevel: 'silent',
            models: [{ name: RUN_MODEL, source: run.source, aliases: [], poolLimit: DEFAULT_POOL_LIMIT }],
            training: { config: run.training, autoStart: true },
            startEngine: options.startEngine,
          }),
        selfEndpoint: async (wanted) => {
          const model = wanted ?? this.serving.models.models.find((m) => m.state !== 'failed')?.name;
          if (!model) throw new PlannerError('unreachable', 'this peer hosts no model to plan with; start it with --model, or give the planner a URL', []);
          const episode = await this.serving.episodes.create({ model, taskId: 'research-planner', kind: 'eval' });
          return { baseUrl: episode.baseUrl, apiKey: episode.apiKey, model };
        },
      }),
    );
    const serving = this.serving;
    const training = this.training;
    const runner = this.runner;
    this.swarm = services.add(
      new SwarmMembershipManager(
        ctx,
        {
          services,
          // libp2p is loaded only when a swarm is configured (now, or later through POST /api/swarm/create|join).
          startP2p: async (settings) => {
            const { startP2pService } = await import('./p2p/service.ts');
            return startP2pService(
              ctx,
              {
                serving,
                clientScripts: () => runner.list().map((client) => client.name),
                trainsLocally: (model) => training.trainsLocally(model),
                // The settings in force when the loop exists (a live change), else those the peer started with.
                asynchronous: (model) => (training.loops.get(model)?.settings.staleness ?? trainingConfigOf(model).staleness) > 0,
              },
              settings,
            );
          },
        },
        options.p2p,
      ),
    );
    await this.swarm.startConfigured();
  }

  private async listen() {
    const api = { prefix: '/api', router: new LayeredRouter(() => this.services.routes()), errorShape: 'api' } as const;
    this.server = createHttpServer({
      mounts: () => [api, ...this.services.mounts()],
      // Loopback names are always allowed; a peer listening on a named host answers to that name too.
      allowedHosts: [this.options.host],
      uiRoot: this.options.uiRoot,
      log: this.log,
      onUpgrade: (req, socket, head) => {
        if (!this.events.handleUpgrade(req, socket, head)) socket.destroy();
      },
    });
    this.port = await listen(this.server, this.options.port, this.options.host);
    const base = `http://${this.options.host}:${this.port}`;
    this.listening = { api: `${base}/api`, gateway: `${base}/v1`, ui: `${base}/#token=${this.token}` };
    recordPeerStart(this.db, { id: this.startId, startedAt: this.startedAt.toISOString(), version: APP_VERSION, args: process.argv.slice(2) });
    this.writeControlFile();
    this.log.info('peer started', { nodeId: this.identity.nodeId, port: this.port });
  }

  /** Lets the CLI on this machine find the running peer: url + token, readable by this user only. */
  private writeControlFile() {
    const body = { pid: process.pid, port: this.port, host: this.options.host, token: this.token, urls: this.urls };
    writeFileAtomic(this.paths.control, JSON.stringify(body, null, 2) + '\n', { mode: 0o600 });
  }

  status(): StatusPayload {
    const status: StatusPayload = {
      app: 'agentjet',
      version: APP_VERSION,
      nodeId: this.identity.nodeId,
      startedAt: this.startedAt.toISOString(),
      uptimeS: Math.round((Date.now() - this.startedAt.getTime()) / 1000),
      roles: this.options.roles,
      dataDir: this.paths.dataDir,
      backend: null,
      urls: this.listening!,
      models: [],
      store: { path: this.paths.store, schemaVersion: schemaVersion(this.db), episodes: countEpisodes(this.db) },
      p2p: { enabled: false, peerId: null, peers: 0, swarm: null },
    };
    this.services.status(status);
    return status;
  }


  /** Closes the services one at a time, the last started first, then the HTTP server and SQLite; safe twice. */
  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop() {
    await this.services.close();
    this.events.close();
    const server = this.server;
    if (server?.listening) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
    if (this.db.open) {
      recordPeerStop(this.db, this.startId);
      this.db.close();
    }
    rmSync(this.paths.control, { force: true });
    this.log.info('peer stopped');
  }
}

/**
 * Each hosted model's training settings, validated before any model loads (a bad setting fails the start at once):
 * the defaults (training/config.ts), then the overrides for every model, then the model's own.
 */
function trainingConfigs(options: PeerOptions): (model: string) => TrainingConfig {
  const { config, perModel } = options.training ?? {};
  const resolved = new Map<string, TrainingConfig>();
  const global = parseTrainingOverrides(config, 'training.');
  const resolve = (model: string) => {
    const own = parseTrainingOverrides(perModel?.[model], `training of model "${model}": `);
    const merged = mergeOverrides(global, own);
    const source = options.models?.find((spec) => spec.name === model)?.source ?? null;
    return resolveTrainingConfig(merged, defaultTrainingConfig(source, merged.lora != null));
  };
  for (const spec of options.models ?? []) resolved.set(spec.name, resolve(spec.name));
  return (model) => resolved.get(model) ?? resolve(model);
}

/** A model source as a run records it: `builtin:tiny` or the folder's path. */
function modelSourceText(source: ModelSource | undefined): string {
  if (!source) return 'unknown';
  return source.kind === 'builtin' ? `builtin:${source.name}` : source.path;
}
