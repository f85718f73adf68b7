/**
 * The peer's one HTTP server. Mounts: the control API (/api), the swarm protocol (/swarm), the OpenAI-compatible
 * gateway (/v1), and the swarm's relays in front of parts of those (the longest matching prefix wins); everything
 * else is the UI. Errors are rendered last, in the shape the
 * mount's clients expect (OpenAI's for /v1).
 */
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { isDiskFullError } from '../atomic-file.ts';
import { HostPolicy, parseRequestTarget } from './edge.ts';
import { anthropicErrorType } from '../../common/anthropic-api.ts';
import { HttpError, insufficientStorage } from './errors.ts';
import type { Router } from './router.ts';
import { createStaticHandler } from './static.ts';
import type { Logger } from '../log.ts';

/** How a mount's errors are rendered: the control API's, OpenAI's (/v1), or Anthropic's (/v1/messages). */
export type ErrorShape = 'api' | 'openai' | 'anthropic';

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
  /**
   * Host names clients may use besides 127.0.0.1, localhost and [::1] (any port): the address the peer listens on,
   * a LAN name. Every other Host is refused (421), which stops DNS rebinding.
   */
  allowedHosts?: readonly string[];
}

export class PortInUseError extends Error {
  override name = 'PortInUseError';
  constructor(readonly port: number, readonly host: string) {
    super(`port ${port} on ${host} is already in use; pick another with --port N (or --port 0 for any free port)`);
  }
}

/**
 * Every request runs inside one error boundary: whatever a request does (a target that does not parse, a handler
 * that throws), it gets an answer and the peer keeps serving. In order: the target, the Host, the mount; on a
 * mount the Origin, the route, the handler; errors rendered last.
 */
export function createHttpServer(options: HttpServerOptions): Server {
  const serveStatic = createStaticHandler(options.uiRoot);
  const hosts = new HostPolicy(options.allowedHosts);

  async function handle(req: IncomingMessage, res: ServerResponse) {
    let shape: ErrorShape = 'api';
    try {
      const url = parseRequestTarget(req.url);
      const mount = longestMatch(options.mounts(), url.pathname);
      if (mount) shape = mount.errorShape;
      hosts.checkHost(req, url, !req.url?.startsWith('/'));
      if (!mount) {
        serveStatic(req, res, url.pathname);
        return;
      }
      // The UI's pages are public; the APIs act, so a browser on another site must not drive them.
      hosts.checkOrigin(req);
      const found = mount.router.match(req.method ?? 'GET', url.pathname);
      if (found === 404) throw new HttpError(404, 'NotFoundError', `no route ${url.pathname}`, { code: 'unknown_url' });
      if (found === 405) {
        throw new HttpError(405, 'MethodNotAllowedError', `${req.method} is not allowed on ${url.pathname}`, {
          code: 'method_not_allowed',
        });
      }
      await found.handler(req, res, { url, params: found.params });
    } catch (err) {
      sendError(res, shape, err, options.log);
    }
  }

  function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer) {
    // After 'upgrade' the socket is ours: an error on it with no listener (a reset) would end the process.
    socket.on('error', () => socket.destroy());
    try {
      const url = parseRequestTarget(req.url);
      hosts.checkHost(req, url, !req.url?.startsWith('/'));
      hosts.checkOrigin(req);
      if (options.onUpgrade) options.onUpgrade(req, socket, head);
      else socket.destroy();
    } catch (err) {
      refuseUpgrade(socket, err, options.log);
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      // sendError itself failed (the connection is gone mid-answer): nothing can be said to this client.
      res.destroy();
      options.log.warn('could not answer a request', { error: String(err) });
    });
  });
  server.on('upgrade', upgrade);
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

/** The HttpError a thrown value answers as: itself, 507 for a full disk (ENOSPC, SQLITE_FULL), else 500. */
export function toHttpError(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  if (isDiskFullError(err)) return insufficientStorage('the request could not be stored');
  return new HttpError(500, 'InternalError', 'internal error; the peer log has the details', { code: 'internal_error' });
}

/** Renders a thrown value as the error answer of `shape` (handlers that answer for another API's clients use it too). */
export function sendError(res: ServerResponse, shape: ErrorShape, err: unknown, log: Logger) {
  const httpError = toHttpError(err);
  if (!(err instanceof HttpError)) log.error('request failed', { error: String((err as Error)?.stack ?? err) });
  if (res.headersSent) {
    // A streaming answer already started: the stream writer reports the error in-band; just end it.
    res.end();
    return;
  }
  const body =
    shape === 'anthropic'
      ? { type: 'error', error: { type: anthropicErrorType(httpError.status), message: httpError.message } }
      : shape === 'openai'
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

/** An upgrade refused before it happened: a plain HTTP answer on the raw socket, then close. */
function refuseUpgrade(socket: Duplex, err: unknown, log: Logger) {
  const httpError = toHttpError(err);
  if (!(err instanceof HttpError)) log.error('upgrade failed', { error: String((err as Error)?.stack ?? err) });
  const text = JSON.stringify({ error: { name: httpError.name, message: httpError.message, field: httpError.details.field } });
  socket.end(
    `HTTP/1.1 ${httpError.status} ${STATUS_CODES[httpError.status] ?? ''}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
  );
}

function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 409) return 'conflict_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}
