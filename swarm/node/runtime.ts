/**
 * The peer runtime's composition root: one per process (headless `agentjet node`, or the child of the Electron
 * shell). It owns the data directory, the store, the HTTP server (UI, control API, swarm protocol, gateway)
 * and the event hub, and closes all of them on stop(), safely twice.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Database } from 'better-sqlite3';
import type { Role, StatusPayload } from '../common/api.ts';
import { EventHub } from './control/events.ts';
import { createControlRouter, LayeredRouter, type ControlRouter } from './control/routes.ts';
import { SwarmMembershipManager, type MembershipHost } from './control/swarm-membership.ts';
import { addSwarmRoutes } from './control/swarm-routes.ts';
import { createHttpServer, listen, type Mount } from './http/server.ts';
import { loadOrCreateIdentity, type NodeIdentity } from './identity.ts';
import type { HostedModelSpec } from './models/model-host.ts';
import { startServing, type Serving, type ServingInit } from './models/serving.ts';
import { createLogger, type Logger, type LogLevel } from './log.ts';
import { dataPaths, type DataPaths } from './paths.ts';
import { openStore, schemaVersion } from './store/db.ts';
import type { ClientRunner } from './runner/runner.ts';
import { startClientRunner } from './runner/service.ts';
import { addUiRoutes } from './control/ui-routes.ts';
import { startTrainingService, type TrainingService } from './training/service.ts';
import type { P2pService } from './p2p/service.ts';
import type { P2pOptions } from './p2p/settings.ts';
import { sqliteTrainingStore } from './training/sqlite-training-store.ts';
import { APP_VERSION } from './version.ts';

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
  training?: { config?: unknown; perModel?: Record<string, unknown>; autoStart?: boolean };
  /** The swarm over libp2p; off unless a swarm token is given here or stored by `agentjet swarm join`. */
  p2p?: P2pOptions;
}

export interface PeerUrls {
  api: string;
  gateway: string;
  ui: string;
}

export class PeerRuntime {
  readonly startedAt = new Date();
  /** Handed to the UI and the CLI; a new one every start. */
  readonly token = randomBytes(24).toString('base64url');
  readonly mounts: Mount[] = [];
  readonly events: EventHub;
  /** Services add their control-API routes here (all behind the bearer token). */
  readonly control: ControlRouter;
  urls!: PeerUrls;
  port = 0;
  /** Hosted models, episodes and the gateway. */
  serving!: Serving;
  /** Attached agent scripts (swarm client role), run against episodes of the swarm protocol. */
  runner!: ClientRunner;
  /** One GRPO training loop per hosted model. */
  training!: TrainingService;
  /** Whether this peer is in a swarm; create / join / leave at runtime (control/swarm-membership.ts). */
  swarm!: SwarmMembershipManager;
  /** The libp2p node and swarm relays; undefined while this peer is in no swarm. */
  get p2p(): P2pService | undefined {
    return this.swarm?.service;
  }
  private stopping: Promise<void> | undefined;
  private server!: Server;
  /** Extra status providers (models, p2p) registered by the services that own them. */
  private readonly statusParts: ((status: StatusPayload) => void)[] = [];

  private constructor(
    readonly options: Required<Omit<PeerOptions, 'uiRoot' | 'models' | 'startEngine' | 'training' | 'p2p'>> & { uiRoot: string },
    readonly paths: DataPaths,
    readonly identity: NodeIdentity,
    readonly db: Database,
    readonly log: Logger,
  ) {
    this.events = new EventHub(this.token, () => this.status());
    this.control = createControlRouter(this.token, () => this.status());
    log.onEntry((entry) => {
      if (entry.level !== 'debug') this.events.broadcast({ type: 'log', data: { level: entry.level, msg: entry.msg, time: entry.time } });
    });
  }

  static async start(options: PeerOptions): Promise<PeerRuntime> {
    const paths = dataPaths(options.dataDir);
    mkdirSync(paths.dataDir, { recursive: true });
    const log = createLogger({ dir: paths.logs, consoleLevel: options.consoleLogLevel ?? 'info' });
    const identity = loadOrCreateIdentity(paths.identity);
    const db = openStore(paths.store);
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

  /** The services this peer runs, each registering its routes, status part and closer. */
  private async startServices(options: PeerOptions) {
    this.serving = await startServing({
      models: options.models ?? [],
      startEngine: options.startEngine,
      db: this.db,
      log: this.log,
      secret: this.identity.secret,
      nodeId: this.identity.nodeId,
      controlToken: this.token,
      gatewayUrl: () => this.urls.gateway,
      mounts: this.mounts,
      control: this.control,
      addStatusPart: (part) => this.addStatusPart(part),
    });
    this.onStop(() => this.serving.close());
    addUiRoutes(this.control, this.db, this.serving.models);
    this.training = await startTrainingService({
      runtime: this,
      host: this.serving.models,
      store: sqliteTrainingStore(this.db),
      ...options.training,
    });
    this.runner = startClientRunner(this);
    // libp2p is loaded only when a swarm is configured (now, or later through POST /api/swarm/create|join).
    this.swarm = new SwarmMembershipManager(this.membershipHost(), options.p2p);
    this.onStop(() => this.swarm.close());
    addSwarmRoutes(this.control, this.swarm);
    await this.swarm.startConfigured();
  }

  /**
   * What the p2p service uses of this runtime. Getters, not copies: the services and the gateway URL are read when
   * used (the URL exists only once the server listens), so this object must never be spread.
   */
  private membershipHost(): MembershipHost {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- getters below must read the runtime's fields late
    const runtime = this;
    return {
      get serving() { return runtime.serving; },
      get runner() { return runtime.runner; },
      get training() { return runtime.training; },
      get urls() { return runtime.urls; },
      db: this.db,
      mounts: this.mounts,
      token: this.token,
      identity: this.identity,
      paths: this.paths,
      options: this.options,
      log: this.log,
      statusChanged: () => this.events.broadcast({ type: 'status', data: this.status() }),
    };
  }

  private async listen() {
    this.mounts.push({ prefix: '/api', router: new LayeredRouter(() => [this.swarm.routes, this.control]), errorShape: 'api' });
    this.server = createHttpServer({
      mounts: this.mounts,
      uiRoot: this.options.uiRoot,
      log: this.log,
      onUpgrade: (req, socket, head) => {
        if (!this.events.handleUpgrade(req, socket, head)) socket.destroy();
      },
    });
    this.port = await listen(this.server, this.options.port, this.options.host);
    const base = `http://${this.options.host}:${this.port}`;
    this.urls = { api: `${base}/api`, gateway: `${base}/v1`, ui: `${base}/#token=${this.token}` };
    this.db
      .prepare('INSERT INTO runs (id, started_at, version, args) VALUES (?, ?, ?, ?)')
      .run(this.runId, this.startedAt.toISOString(), APP_VERSION, JSON.stringify(process.argv.slice(2)));
    this.writeControlFile();
    this.log.info('peer started', { nodeId: this.identity.nodeId, port: this.port });
  }

  readonly runId = randomBytes(8).toString('hex');

  /** Lets the CLI on this machine find the running peer: url + token, readable by this user only. */
  private writeControlFile() {
    const tmp = `${this.paths.control}.${process.pid}.tmp`;
    const body = { pid: process.pid, port: this.port, host: this.options.host, token: this.token, urls: this.urls };
    writeFileSync(tmp, JSON.stringify(body, null, 2) + '\n', { mode: 0o600 });
    renameSync(tmp, this.paths.control);
  }

  /** Services that own part of the status (hosted models, the p2p node) register a contributor here. */
  addStatusPart(part: (status: StatusPayload) => void): void {
    this.statusParts.push(part);
  }

  status(): StatusPayload {
    const episodes = this.countEpisodes();
    const status: StatusPayload = {
      app: 'agentjet',
      version: APP_VERSION,
      nodeId: this.identity.nodeId,
      startedAt: this.startedAt.toISOString(),
      uptimeS: Math.round((Date.now() - this.startedAt.getTime()) / 1000),
      roles: this.options.roles,
      dataDir: this.paths.dataDir,
      backend: null,
      urls: this.urls,
      models: [],
      store: { path: this.paths.store, schemaVersion: schemaVersion(this.db), episodes },
      p2p: { enabled: false, peerId: null, peers: 0, swarm: null },
    };
    for (const part of this.statusParts) part(status);
    this.swarm?.contributeStatus(status);
    return status;
  }

  private countEpisodes(): number {
    const table = this.db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'episodes'").get();
    if (!table) return 0;
    return (this.db.prepare('SELECT COUNT(*) AS n FROM episodes').get() as { n: number }).n;
  }

  /** Resources to close on stop, last registered closed first. */
  private readonly closers: (() => Promise<void> | void)[] = [];
  onStop(closer: () => Promise<void> | void): void {
    this.closers.push(closer);
  }

  stop(): Promise<void> {
    this.stopping ??= this.doStop();
    return this.stopping;
  }

  private async doStop() {
    const results = await Promise.allSettled([...this.closers].reverse().map(async (close) => close()));
    for (const r of results) if (r.status === 'rejected') this.log.warn('error while stopping', { error: String(r.reason) });
    this.events.close();
    if (this.server?.listening) {
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
    }
    if (this.db.open) {
      this.db.prepare('UPDATE runs SET stopped_at = ? WHERE id = ?').run(new Date().toISOString(), this.runId);
      this.db.close();
    }
    rmSync(this.paths.control, { force: true });
    this.log.info('peer stopped');
  }
}
