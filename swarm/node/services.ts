/**
 * What a peer's services are given and what they give back.
 *
 * A service is a function `startX(ctx, deps…) → handle`. It receives the small PeerContext (and, by name, the other
 * services' narrow interfaces it needs), never the runtime that composes it. Its handle says what it adds to the
 * peer: control routes, HTTP mounts, a part of the status, and how to close it. The runtime keeps the handles in a
 * ServiceSet in start order and closes them one at a time in reverse order, so a service is closed before the ones
 * it was started on (training finishes its step before the engines close).
 */
import type { Database } from 'better-sqlite3';
import type { Role, ServerEvent, StatusPayload } from '../common/api.ts';
import type { Mount } from './http/server.ts';
import type { Router } from './http/router.ts';
import type { NodeIdentity } from './identity.ts';
import type { Logger } from './log.ts';
import type { DataPaths } from './paths.ts';

export interface PeerUrls {
  api: string;
  gateway: string;
  ui: string;
}

/** Asked for the peer's URLs before its HTTP server listens (they exist only once it does). */
export class NotListeningError extends Error {
  override name = 'NotListeningError';
  constructor() {
    super('the peer is not listening yet; its URLs are known once the HTTP server has started');
  }
}

/** All a service gets from the peer. */
export interface PeerContext {
  readonly db: Database;
  readonly log: Logger;
  readonly paths: DataPaths;
  readonly identity: NodeIdentity;
  readonly roles: readonly Role[];
  /** The control API's bearer token (a new one every start). */
  readonly controlToken: string;
  /** Publishes an event on the control WebSocket. */
  publish(event: ServerEvent): void;
  /** The status changed in a way UIs should see now, not at the next status tick. */
  statusChanged(): void;
  /** The peer's URLs; NotListeningError before the HTTP server listens. */
  urls(): PeerUrls;
}

/** What a running service adds to the peer. */
export interface ServiceHandle {
  readonly name: string;
  /** Control-API routes (/api/…), each behind the bearer token (build them on a ControlRouter). */
  readonly routes?: Router;
  /** HTTP mounts; a request goes to the mount with the longest matching prefix. */
  readonly mounts?: readonly Mount[];
  /** Fills in this service's part of the status. */
  status?(status: StatusPayload): void;
  /** Stops the service; safe to call twice. */
  close(): Promise<void>;
}

/** The running services of a peer, in start order. */
export class ServiceSet {
  private readonly handles: ServiceHandle[] = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  add<H extends ServiceHandle>(handle: H): H {
    if (this.closing) throw new Error(`service "${handle.name}" started while the peer is stopping`);
    this.handles.push(handle);
    return handle;
  }

  /** Takes a handle out (a swarm left) and closes it. */
  async remove(handle: ServiceHandle): Promise<void> {
    const at = this.handles.indexOf(handle);
    if (at >= 0) this.handles.splice(at, 1);
    await handle.close();
  }

  /** Control routes of the running services, the latest started first (a swarm's routes shadow none of the rest). */
  routes(): Router[] {
    return this.handles.flatMap((h) => (h.routes ? [h.routes] : [])).reverse();
  }

  mounts(): Mount[] {
    return this.handles.flatMap((h) => h.mounts ?? []);
  }

  status(status: StatusPayload): void {
    for (const handle of this.handles) handle.status?.(status);
  }

  /** Closes every service one at a time, the last started first; every one is closed even when one fails. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      while (this.handles.length > 0) {
        const handle = this.handles.pop()!;
        try {
          await handle.close();
        } catch (err) {
          this.log.warn('error while stopping a service', { service: handle.name, error: String(err) });
        }
      }
    })();
    return this.closing;
  }
}
