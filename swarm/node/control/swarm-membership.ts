/**
 * This peer's membership of a private swarm, changeable while it runs. Create and join start the p2p service
 * (p2p/service.ts) without a restart and store the token exactly as `agentjet swarm create|join` does (so the next
 * start joins again); leave stops the service and forgets the stored token.
 *
 * The running p2p service is one handle in the peer's ServiceSet: joining adds it (its routes, relay mounts and
 * status part come with it), leaving removes and closes it, so a peer can leave and join again in one process.
 */
import { rmSync } from 'node:fs';
import type { SwarmMembership } from '../../common/api.ts';
import { InvalidSwarmTokenError } from '../../../p2p/swarm-token/errors.ts';
import { createSwarmToken, parseSwarmToken } from '../../../p2p/swarm-token/token.ts';
import { HttpError } from '../http/errors.ts';
import type { P2pService } from '../p2p/service.ts';
import { readStoredSwarmToken, resolveP2p, storeSwarmToken, swarmFile, type P2pOptions, type ResolvedP2p } from '../p2p/settings.ts';
import type { PeerContext, ServiceHandle, ServiceSet } from '../services.ts';
import { ControlRouter } from './routes.ts';
import { addSwarmRoutes } from './swarm-routes.ts';

/** The swarm name when create is given none (the CLI's default too). */
export const DEFAULT_SWARM_NAME = 'lab';

export interface MembershipDeps {
  /** Where the p2p service's handle goes while this peer is in a swarm. */
  services: Pick<ServiceSet, 'add' | 'remove'>;
  /** Starts the p2p service of a swarm (libp2p is loaded only then). */
  startP2p(settings: ResolvedP2p): Promise<P2pService>;
}

export const invalidSwarmToken = (message: string) =>
  new HttpError(400, 'InvalidSwarmTokenError', `not a swarm token: ${message}`, { field: 'token', code: 'invalid_swarm_token' });

export class SwarmMembershipManager implements ServiceHandle {
  readonly name = 'swarm-membership';
  readonly routes: ControlRouter;
  private joined: { service: P2pService; token: string } | undefined;
  /** Create, join and leave run one at a time: a double click never starts two nodes. */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly ctx: PeerContext,
    private readonly deps: MembershipDeps,
    private readonly options: P2pOptions = {},
  ) {
    this.routes = new ControlRouter(ctx.controlToken);
    addSwarmRoutes(this.routes, this);
  }

  /** The running p2p service; undefined while this peer is in no swarm. */
  get service(): P2pService | undefined {
    return this.joined?.service;
  }

  /** At the peer's start: the swarm of --swarm-token or of the stored token, if any. */
  async startConfigured(): Promise<void> {
    const settings = resolveP2p(this.ctx.paths.p2p, this.options);
    if (!settings) return;
    const token = this.options.swarmToken ?? readStoredSwarmToken(this.ctx.paths.p2p)!;
    await this.startService(token);
  }

  view(): SwarmMembership {
    const joined = this.joined;
    return {
      joined: joined !== undefined,
      disabled: this.options.enabled === false,
      swarm: joined?.service.node.swarmName ?? null,
      token: joined?.token ?? null,
      peerId: joined?.service.node.peerId ?? null,
      addresses: joined?.service.node.multiaddrs() ?? [],
    };
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
      if (!this.joined)
        throw new HttpError(409, 'NotInSwarmError', 'this peer is in no swarm; create one or join one first', { code: 'not_in_swarm' });
      await this.stopService();
      // Forgotten as well: the next start stays off the swarm (a --swarm-token flag still applies to its own start).
      rmSync(swarmFile(this.ctx.paths.p2p), { force: true });
      this.ctx.log.info('left the swarm');
      this.ctx.statusChanged();
      return this.view();
    });
  }

  /** On the peer's stop (the p2p handle, started after this one, is closed before it by the ServiceSet). */
  close(): Promise<void> {
    this.closed = true;
    return this.serialised(() => this.stopService());
  }

  private checkCanJoin() {
    if (this.closed) throw new HttpError(503, 'ServiceUnavailableError', 'the peer is stopping', { code: 'stopping' });
    if (this.options.enabled === false)
      throw new HttpError(409, 'P2pDisabledError', 'this peer was started with --no-p2p; restart it without that flag to join a swarm', { code: 'p2p_disabled' });
    if (this.joined)
      throw new HttpError(409, 'AlreadyInSwarmError', `this peer is already in swarm "${this.joined.service.node.swarmName}"; leave it first`, { code: 'already_in_swarm' });
  }

  /** Started first, stored once it runs: a token whose node cannot start is not kept. */
  private async startAndStore(token: string) {
    await this.startService(token);
    try {
      storeSwarmToken(this.ctx.paths.p2p, token);
    } catch (err) {
      await this.stopService();
      throw err;
    }
    this.ctx.statusChanged();
  }

  private async startService(token: string): Promise<void> {
    const settings = resolveP2p(this.ctx.paths.p2p, { ...this.options, enabled: true, swarmToken: token })!;
    const service = await this.deps.startP2p(settings);
    this.deps.services.add(service);
    this.joined = { service, token };
  }

  private async stopService(): Promise<void> {
    const joined = this.joined;
    if (!joined) return;
    this.joined = undefined;
    await this.deps.services.remove(joined.service);
  }

  private serialised<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }
}
