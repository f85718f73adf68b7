/**
 * This peer's membership of a private swarm, changeable while it runs. Create and join start the p2p service
 * (p2p/service.ts) without a restart and store the token exactly as `agentjet swarm create|join` does (so the next
 * start joins again); leave stops the service and forgets the stored token.
 *
 * The service registers control routes, HTTP mounts (the relays), status parts and closers on its host. Here it
 * gets a host of its own (a scope) whose registrations are added to the runtime's while it runs and taken away when
 * the peer leaves, so a peer can leave and join again in one process.
 */
import { rmSync } from 'node:fs';
import type { SwarmMembership, StatusPayload } from '../../common/api.ts';
import { InvalidSwarmTokenError } from '../../../p2p/swarm-token/errors.ts';
import { createSwarmToken, parseSwarmToken } from '../../../p2p/swarm-token/token.ts';
import { HttpError } from '../http/errors.ts';
import { Router } from '../http/router.ts';
import type { Mount } from '../http/server.ts';
import type { P2pHost, P2pService } from '../p2p/service.ts';
import { readStoredSwarmToken, resolveP2p, storeSwarmToken, swarmFile, type P2pOptions } from '../p2p/settings.ts';
import { ControlRouter } from './routes.ts';

/** The swarm name when create is given none (the CLI's default too). */
export const DEFAULT_SWARM_NAME = 'lab';

/** What membership needs from the runtime: the p2p service's host, less what each scope brings itself. */
export type MembershipHost = Omit<P2pHost, 'control' | 'addStatusPart' | 'onStop'> & {
  /** After a change, so that UIs see it at once (not at the next status tick). */
  statusChanged(): void;
};

/** What one running p2p service registered; undone on leave. */
interface P2pScope {
  service: P2pService;
  token: string;
  routes: ControlRouter;
  mounts: Mount[];
  statusParts: ((status: StatusPayload) => void)[];
  closers: (() => Promise<void> | void)[];
}

export const invalidSwarmToken = (message: string) =>
  new HttpError(400, 'InvalidSwarmTokenError', `not a swarm token: ${message}`, { field: 'token', code: 'invalid_swarm_token' });

export class SwarmMembershipManager {
  private scope: P2pScope | undefined;
  /** Create, join and leave run one at a time: a double click never starts two nodes. */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly noRoutes = new Router();

  constructor(
    private readonly host: MembershipHost,
    private readonly options: P2pOptions = {},
  ) {}

  get service(): P2pService | undefined {
    return this.scope?.service;
  }

  /** The running service's control routes (GET /api/peers, …); none while off the swarm. */
  get routes(): Router {
    return this.scope?.routes ?? this.noRoutes;
  }

  /** At the peer's start: the swarm of --swarm-token or of the stored token, if any. */
  async startConfigured(): Promise<void> {
    const settings = resolveP2p(this.host.paths.p2p, this.options);
    if (!settings) return;
    const token = this.options.swarmToken ?? readStoredSwarmToken(this.host.paths.p2p)!;
    await this.startScope(token);
  }

  view(): SwarmMembership {
    const scope = this.scope;
    return {
      joined: scope !== undefined,
      disabled: this.options.enabled === false,
      swarm: scope?.service.node.swarmName ?? null,
      token: scope?.token ?? null,
      peerId: scope?.service.node.peerId ?? null,
      addresses: scope?.service.node.multiaddrs() ?? [],
    };
  }

  contributeStatus(status: StatusPayload): void {
    for (const part of this.scope?.statusParts ?? []) part(status);
  }

  create(request: { name?: string; bootstrap?: string[] }): Promise<SwarmMembership> {
    return this.serialised(async () => {
      this.checkCanJoin();
      let token: string;
      try {
        token = createSwarmToken({ name: request.name ?? DEFAULT_SWARM_NAME, bootstrap: request.bootstrap ?? [] });
      } catch (err) {
        if (err instanceof InvalidSwarmTokenError)
          throw new HttpError(400, 'InvalidRequestError', `the swarm cannot be created: ${err.message}`, { field: 'name', code: 'invalid_request' });
        throw err;
      }
      await this.startAndStore(token);
      return this.view();
    });
  }

  join(token: string): Promise<SwarmMembership> {
    return this.serialised(async () => {
      // The token is checked before anything else: a bad one changes nothing.
      try {
        parseSwarmToken(token);
      } catch (err) {
        if (err instanceof InvalidSwarmTokenError) throw invalidSwarmToken(err.message);
        throw err;
      }
      this.checkCanJoin();
      await this.startAndStore(token.trim());
      return this.view();
    });
  }

  leave(): Promise<SwarmMembership> {
    return this.serialised(async () => {
      if (!this.scope)
        throw new HttpError(409, 'NotInSwarmError', 'this peer is in no swarm; create one or join one first', { code: 'not_in_swarm' });
      await this.stopScope();
      // Forgotten as well: the next start stays off the swarm (a --swarm-token flag still applies to its own start).
      rmSync(swarmFile(this.host.paths.p2p), { force: true });
      this.host.log.info('left the swarm');
      this.host.statusChanged();
      return this.view();
    });
  }

  /** On the peer's stop. */
  close(): Promise<void> {
    this.closed = true;
    return this.serialised(() => this.stopScope());
  }

  private checkCanJoin() {
    if (this.closed) throw new HttpError(503, 'ServiceUnavailableError', 'the peer is stopping', { code: 'stopping' });
    if (this.options.enabled === false)
      throw new HttpError(409, 'P2pDisabledError', 'this peer was started with --no-p2p; restart it without that flag to join a swarm', { code: 'p2p_disabled' });
    if (this.scope)
      throw new HttpError(409, 'AlreadyInSwarmError', `this peer is already in swarm "${this.scope.service.node.swarmName}"; leave it first`, { code: 'already_in_swarm' });
  }

  /** Started first, stored once it runs: a token whose node cannot start is not kept. */
  private async startAndStore(token: string) {
    await this.startScope(token);
    try {
      storeSwarmToken(this.host.paths.p2p, token);
    } catch (err) {
      await this.stopScope();
      throw err;
    }
    this.host.statusChanged();
  }

  private async startScope(token: string): Promise<void> {
    const settings = resolveP2p(this.host.paths.p2p, { ...this.options, enabled: true, swarmToken: token })!;
    const scope: Omit<P2pScope, 'service'> = {
      token,
      routes: new ControlRouter(this.host.token),
      mounts: [],
      statusParts: [],
      closers: [],
    };
    const rootMounts = this.host.mounts;
    // The service puts its relays in front of the local mounts of this copy; they are moved to the runtime's below.
    const scopedMounts = [...rootMounts];
    const host = this.host;
    const scopedHost: P2pHost = {
      get serving() { return host.serving; },
      get runner() { return host.runner; },
      get training() { return host.training; },
      get urls() { return host.urls; },
      db: host.db,
      token: host.token,
      identity: host.identity,
      paths: host.paths,
      options: host.options,
      log: host.log,
      control: scope.routes,
      mounts: scopedMounts,
      addStatusPart: (part) => void scope.statusParts.push(part),
      onStop: (closer) => void scope.closers.push(closer),
    };
    const { startP2pService } = await import('../p2p/service.ts');
    let service: P2pService;
    try {
      service = await startP2pService(scopedHost, settings);
    } catch (err) {
      await closeAll(scope.closers);
      throw err;
    }
    scope.mounts = scopedMounts.filter((mount) => !rootMounts.includes(mount));
    rootMounts.unshift(...scope.mounts);
    this.scope = { ...scope, service };
  }

  private async stopScope(): Promise<void> {
    const scope = this.scope;
    if (!scope) return;
    this.scope = undefined;
    for (const mount of scope.mounts) {
      const at = this.host.mounts.indexOf(mount);
      if (at >= 0) this.host.mounts.splice(at, 1);
    }
    await closeAll(scope.closers);
  }

  private serialised<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }
}

/** Last registered closed first; every closer runs even when one fails. */
async function closeAll(closers: (() => Promise<void> | void)[]): Promise<void> {
  const results = await Promise.allSettled([...closers].reverse().map(async (close) => close()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
