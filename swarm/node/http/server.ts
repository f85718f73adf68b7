/**
 * The peer's one HTTP server. Mounts: the control API (/api), the swarm protocol (/swarm), the OpenAI-compatible
 * gateway (/v1), and the swarm's relays in front of parts of those (the longest matching prefix wins); everything
 * else is the UI. Errors are rendered last, in the shape the
 * mount's clients expect (OpenAI's for /v1).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { HttpError } from './errors.ts';
import type { Router } from './router.ts';
import { createStaticHandler } from './static.ts';
import type { Logger } from '../log.ts';

export type ErrorShape = 'api' | 'openai';

export interface Mount {
  prefix: string;
  router: Router;
  errorShape: ErrorShape;
}

export interface HttpServerOptions {
  /** Read per request: services add and remove mounts while the peer runs (a swarm joined or left). */
  mounts: () => readonly Mount[];
  uiRoot: string;
  log: Logger;
  onUpgrade?: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

export class PortInUseError extends Error {
  override name = 'PortInUseError';
  constructor(readonly port: number, readonly host: string) {
    super(`port ${port} on ${host} is already in use; pick another with --port N (or --port 0 for any free port)`);
  }
}

export function createHttpServer(options: HttpServerOptions): Server {
  const serveStatic = createStaticHandler(options.uiRoot);

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const mount = longestMatch(options.mounts(), url.pathname);
    if (!mount) {
      serveStatic(req, res, url.pathname);
      return;
    }
    try {
      const found = mount.router.match(req.method ?? 'GET', url.pathname);
      if (found === 404) throw new HttpError(404, 'NotFoundError', `no route ${url.pathname}`, { code: 'unknown_url' });
      if (found === 405) {
        throw new HttpError(405, 'MethodNotAllowedError', `${req.method} is not allowed on ${url.pathname}`, {
          code: 'method_not_allowed',
        });
      }
      await found.handler(req, res, { url, params: found.params });
    } catch (err) {
      sendError(res, mount.errorShape, err, options.log);
    }
  }

  const server = createServer((req, res) => void handle(req, res));
  if (options.onUpgrade) server.on('upgrade', options.onUpgrade);
  // Keep-alive sockets would hold close() open for seconds; agents reconnect cheaply on loopback.
  server.keepAliveTimeout = 5_000;
  return server;
}

/** The mount with the longest prefix that matches: a relay of `/swarm/v1/episodes` wins over `/swarm`. */
function longestMatch(mounts: readonly Mount[], pathname: string): Mount | undefined {
  let best: Mount | undefined;
  for (const m of mounts) {
    const matches = pathname === m.prefix || pathname.startsWith(m.prefix + '/');
    if (matches && (!best || m.prefix.length > best.prefix.length)) best = m;
  }
  return best;
}

export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      reject(err.code === 'EADDRINUSE' ? new PortInUseError(port, host) : err);
    };
    const onListening = () => {
      server.off('error', onError);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

function sendError(res: ServerResponse, shape: ErrorShape, err: unknown, log: Logger) {
  const httpError =
    err instanceof HttpError
      ? err
      : new HttpError(500, 'InternalError', 'internal error; the peer log has the details', { code: 'internal_error' });
  if (!(err instanceof HttpError)) log.error('request failed', { error: String((err as Error)?.stack ?? err) });
  if (res.headersSent) {
    // A streaming answer already started: the stream writer reports the error in-band; just end it.
    res.end();
    return;
  }
  const body =
    shape === 'openai'
      ? {
          error: {
            message: httpError.message,
            type: openAiErrorType(httpError.status),
            param: httpError.details.field ?? null,
            code: httpError.details.code ?? null,
          },
        }
      : { error: { name: httpError.name, message: httpError.message, field: httpError.details.field } };
  const text = JSON.stringify(body);
  res.writeHead(httpError.status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...httpError.details.headers,
  });
  res.end(text);
}

function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 409) return 'conflict_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}
