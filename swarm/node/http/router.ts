/**
 * A small router: routes are `METHOD /path/:param`, matched in registration order. Handlers get the parsed URL
 * and path params; they write the response themselves (JSON helpers in respond.ts) or throw an HttpError.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from './errors.ts';

export interface RouteContext {
  url: URL;
  params: Record<string, string>;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RouteContext) => Promise<void> | void;

interface Route {
  method: string;
  pattern: RegExp;
  keys: string[];
  handler: Handler;
}

export class Router {
  private readonly routes: Route[] = [];

  add(method: string, path: string, handler: Handler): this {
    const keys: string[] = [];
    const source = path
      .split('/')
      .map((part) => {
        if (part.startsWith(':')) {
          keys.push(part.slice(1));
          return '([^/]+)';
        }
        return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      })
      .join('/');
    this.routes.push({ method: method.toUpperCase(), pattern: new RegExp(`^${source}/?$`), keys, handler });
    return this;
  }

  get(path: string, handler: Handler) {
    return this.add('GET', path, handler);
  }
  post(path: string, handler: Handler) {
    return this.add('POST', path, handler);
  }
  put(path: string, handler: Handler) {
    return this.add('PUT', path, handler);
  }
  delete(path: string, handler: Handler) {
    return this.add('DELETE', path, handler);
  }

  /**
   * The handler for a request, or why there is none (`404` no such path, `405` path exists for other methods).
   * Throws a 400 when a path parameter is not valid percent-encoding: before any handler, so before its auth check.
   */
  match(method: string, pathname: string): { handler: Handler; params: Record<string, string> } | 404 | 405 {
    let pathMatched = false;
    for (const route of this.routes) {
      const m = route.pattern.exec(pathname);
      if (!m) continue;
      pathMatched = true;
      if (route.method !== method) continue;
      const params: Record<string, string> = {};
      route.keys.forEach((key, i) => (params[key] = decodeParam(key, m[i + 1])));
      return { handler: route.handler, params };
    }
    return pathMatched ? 405 : 404;
  }
}

function decodeParam(key: string, raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new HttpError(400, 'InvalidRequestError', `path parameter ${key} is not valid percent-encoding (UTF-8 bytes as %XX)`, {
      field: key,
      code: 'invalid_path_encoding',
    });
  }
}
