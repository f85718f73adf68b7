/** The control API's router (/api/...). Every route requires the per-start bearer token. */
import { Router, type Handler } from '../http/router.ts';
import { sendJson } from '../http/respond.ts';
import { requireControlToken } from './auth.ts';
import type { StatusPayload } from '../../common/api.ts';

export class ControlRouter extends Router {
  constructor(private readonly token: string) {
    super();
  }

  /** Registers a route behind the bearer token; services add their routes through this. */
  override add(method: string, path: string, handler: Handler): this {
    return super.add(method, path, (req, res, ctx) => {
      requireControlToken(req, this.token);
      return handler(req, res, ctx);
    });
  }
}

export function createControlRouter(token: string, status: () => StatusPayload): ControlRouter {
  const router = new ControlRouter(token);
  router.get('/api/status', (_req, res) => sendJson(res, 200, status()));
  return router;
}

/**
 * The /api mount: routes that come and go at runtime (the swarm's, while this peer is in one) tried before the
 * fixed control routes. A path known to any layer with other methods still answers 405.
 */
export class LayeredRouter extends Router {
  constructor(private readonly layers: () => readonly Router[]) {
    super();
  }

  override match(method: string, pathname: string): ReturnType<Router['match']> {
    let missing: 404 | 405 = 404;
    for (const layer of this.layers()) {
      const found = layer.match(method, pathname);
      if (typeof found === 'object') return found;
      if (found === 405) missing = 405;
    }
    return missing;
  }
}
