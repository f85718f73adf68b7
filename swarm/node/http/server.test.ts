import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { StatusPayload } from '../../common/api.ts';
import { requireControlToken } from '../control/auth.ts';
import { EventHub } from '../control/events.ts';
import { createLogger, type Logger } from '../log.ts';
import { MAX_JSON_DEPTH, readJson, readValidated, sendJson } from './respond.ts';
import { Router } from './router.ts';
import { createHttpServer, listen, type Mount } from './server.ts';
import { rawGet, rawRequest } from './testing/raw-request.ts';
import { sqliteFullError } from '../store/testing/sqlite-full.ts';

const TOKEN = 'test-token';
let dir: string;
let server: Server;
let port: number;
let hub: EventHub;
let log: Logger;

/** A real ENOSPC, as a full disk gives it (Linux's /dev/full is always full). */
function diskFullError(): unknown {
  try {
    appendFileSync('/dev/full', 'x');
  } catch (err) {
    return err;
  }
  throw new Error('/dev/full took a write; this test needs Linux');
}

function routes(prefix: string): Router {
  return new Router()
    .get(`${prefix}/items/:id`, (req, res, ctx) => {
      requireControlToken(req, TOKEN);
      sendJson(res, 200, { id: ctx.params.id });
    })
    .post(`${prefix}/echo`, async (req, res) => sendJson(res, 200, { body: await readJson(req) }))
    .post(`${prefix}/validated`, async (req, res) => sendJson(res, 200, await readValidated(req, z.object({ a: z.unknown() }))))
    .get(`${prefix}/disk-full`, () => {
      throw diskFullError();
    })
    .get(`${prefix}/sqlite-full`, () => {
      throw sqliteFullError();
    })
    .get(`${prefix}/bug`, () => {
      throw new TypeError('a bug in a handler');
    });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agentjet-http-'));
  const uiRoot = join(dir, 'ui');
  mkdirSync(join(uiRoot, 'assets'), { recursive: true });
  writeFileSync(join(uiRoot, 'index.html'), '<!doctype html><title>ui</title>');
  writeFileSync(join(uiRoot, 'assets', 'app.js'), 'export {};');
  log = createLogger({ dir: join(dir, 'logs'), consoleLevel: 'silent' });
  hub = new EventHub(TOKEN, () => ({}) as StatusPayload);
  const mounts: Mount[] = [
    { prefix: '/api', router: routes('/api'), errorShape: 'api' },
    { prefix: '/v1', router: routes('/v1'), errorShape: 'openai' },
  ];
  server = createHttpServer({
    mounts: () => mounts,
    uiRoot,
    log,
    allowedHosts: ['peer.lan'],
    onUpgrade: (req, socket, head) => {
      if (!hub.handleUpgrade(req, socket, head)) socket.destroy();
    },
  });
  port = await listen(server, 0, '127.0.0.1');
});

afterAll(async () => {
  hub.close();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const json = (body: string) => JSON.parse(body) as { error: { name?: string; code?: string | null; field?: string; type?: string } };

async function expectStillServing() {
  const res = await rawGet(port, '/');
  expect(res.status).toBe(200);
}

function post(path: string, body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) {
  return fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers, body });
}

describe('request targets that used to end the process', () => {
  it.each(['//[', 'http://[::1/x', '/%E0%A4%A', '/assets/%E0%A4%A', '/api/%E0%A4%A', '/v1//['])(
    'answers GET %s, not with a 5xx, and keeps serving',
    async (target) => {
      const res = await rawGet(port, target);
      expect(res.status).toBeGreaterThanOrEqual(200);
      expect(res.status).toBeLessThan(500);
      await expectStillServing();
    },
  );

  it('answers a target that is no URL with 400 InvalidRequestError', async () => {
    for (const target of ['http://[::1/x', '/%E0%A4%A', '/assets/%E0%A4%A', 'http://127.0.0.1/%E0%A4%A']) {
      const res = await rawGet(port, target);
      expect(res.status).toBe(400);
      expect(json(res.body).error.name).toBe('InvalidRequestError');
    }
  });

  it('takes //[ as a path (an empty segment, then "["): the UI page, not an authority that does not parse', async () => {
    const res = await rawGet(port, '//[');
    expect(res.status).toBe(200);
    expect(res.body).toContain('<title>ui</title>');
  });

  it('survives WebSocket upgrades to //[ and to targets that do not parse (400)', async () => {
    const upgrade = (target: string) =>
      rawRequest(
        port,
        [`GET ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='].join('\r\n'),
      );
    // Not an upgrade this peer serves: the socket is closed without an answer, as for any other path.
    expect((await upgrade('//[')).status).toBe(0);
    await expectStillServing();
    expect((await upgrade('http://[::1/x')).status).toBe(400);
    await expectStillServing();
  });

  it('decodes route parameters safely: malformed percent-encoding is 400 naming the parameter, before the token check', async () => {
    const res = await rawGet(port, '/api/items/%E0%A4%A');
    expect(res.status).toBe(400);
    expect(json(res.body).error).toMatchObject({ name: 'InvalidRequestError', field: 'id' });
    const good = await fetch(`http://127.0.0.1:${port}/api/items/caf%C3%A9`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(await good.json()).toEqual({ id: 'café' });
  });

  it('answers a handler bug with 500 and keeps serving', async () => {
    const res = await rawGet(port, '/api/bug');
    expect(res.status).toBe(500);
    expect(json(res.body).error.name).toBe('InternalError');
    await expectStillServing();
  });
});

describe('a full disk', () => {
  it('answers 507 InsufficientStorageError when a handler hits ENOSPC or SQLITE_FULL', async () => {
    for (const path of ['/api/disk-full', '/api/sqlite-full']) {
      const res = await rawGet(port, path);
      expect(res.status).toBe(507);
      expect(json(res.body).error.name).toBe('InsufficientStorageError');
    }
    const openai = await rawGet(port, '/v1/disk-full');
    expect(openai.status).toBe(507);
    expect(json(openai.body).error).toMatchObject({ type: 'server_error', code: 'insufficient_storage' });
  });
});

describe('JSON bodies at the edge', () => {
  it(`accepts nesting up to ${MAX_JSON_DEPTH} levels and refuses deeper with 400 json_too_deep`, async () => {
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    expect((await post('/api/echo', nested(MAX_JSON_DEPTH))).status).toBe(200);
    const deeper = await post('/api/echo', nested(MAX_JSON_DEPTH + 1));
    expect(deeper.status).toBe(400);
    expect(((await deeper.json()) as { error: { name: string } }).error.name).toBe('JsonTooDeepError');
    const tenThousand = await post('/api/validated', `{"a":${nested(10_000)}}`);
    expect(tenThousand.status).toBe(400);
    expect(((await tenThousand.json()) as { error: { name: string } }).error.name).toBe('JsonTooDeepError');
    const openai = await post('/v1/echo', nested(10_000));
    expect(openai.status).toBe(400);
    expect(((await openai.json()) as { error: { code: string } }).error.code).toBe('json_too_deep');
  });

  it('does not count brackets inside strings, escaped quotes included', async () => {
    const text = JSON.stringify({ a: '"['.repeat(1000) + '\\' });
    const res = await post('/api/echo', text);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ body: JSON.parse(text) });
  });

  it('parses only bodies sent as JSON: text/plain and untyped bodies are 415', async () => {
    const body = JSON.stringify({ a: 1 });
    const plain = await post('/api/validated', body, { 'content-type': 'text/plain;charset=UTF-8' });
    expect(plain.status).toBe(415);
    expect(((await plain.json()) as { error: { name: string } }).error.name).toBe('UnsupportedMediaTypeError');
    const form = await post('/v1/echo', body, { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.status).toBe(415);
    expect(((await form.json()) as { error: { code: string } }).error.code).toBe('unsupported_media_type');
    const untyped = await rawRequest(port, ['POST /api/echo HTTP/1.1', `Host: 127.0.0.1:${port}`, `Content-Length: ${body.length}`].join('\r\n'), body);
    expect(untyped.status).toBe(415);
    const charset = await post('/api/validated', body, { 'content-type': 'Application/JSON; charset=utf-8' });
    expect(charset.status).toBe(200);
  });

  it('still answers a request with no body and no type as an empty body (400)', async () => {
    const res = await rawRequest(port, ['POST /api/echo HTTP/1.1', `Host: 127.0.0.1:${port}`, 'Content-Length: 0'].join('\r\n'));
    expect(res.status).toBe(400);
    expect(json(res.body).error.name).toBe('InvalidRequestError');
  });
});

describe('Host and Origin', () => {
  it('refuses foreign Host names with 421 HostNotAllowedError, on the APIs and the UI alike', async () => {
    for (const target of ['/', '/api/items/1', '/v1/items/1']) {
      const res = await rawRequest(port, [`GET ${target} HTTP/1.1`, 'Host: evil.example'].join('\r\n'));
      expect(res.status).toBe(421);
      expect(json(res.body).error.name ?? json(res.body).error.code).toMatch(/HostNotAllowedError|host_not_allowed/);
    }
    const absolute = await rawRequest(port, ['GET http://evil.example/ HTTP/1.1', `Host: 127.0.0.1:${port}`].join('\r\n'));
    expect(absolute.status).toBe(421);
  });

  it('answers to loopback names on any port, the connection address and configured names', async () => {
    for (const host of ['127.0.0.1', `localhost:${port}`, 'LOCALHOST.:1', '[::1]:9', 'peer.lan:8470']) {
      const res = await rawRequest(port, ['GET / HTTP/1.1', `Host: ${host}`].join('\r\n'));
      expect(res.status, host).toBe(200);
    }
    const noHost = await rawRequest(port, 'GET / HTTP/1.0');
    expect(noHost.status).toBe(200);
  });

  it('refuses API requests from other origins with 403 OriginNotAllowedError; own origin and none are fine', async () => {
    const from = (origin?: string) =>
      fetch(`http://127.0.0.1:${port}/api/items/1`, { headers: { authorization: `Bearer ${TOKEN}`, ...(origin ? { origin } : {}) } });
    const evil = await from('http://evil.example');
    expect(evil.status).toBe(403);
    expect(((await evil.json()) as { error: { name: string } }).error.name).toBe('OriginNotAllowedError');
    expect((await from('null')).status).toBe(403);
    expect((await from(`http://127.0.0.1:${port}`)).status).toBe(200);
    expect((await from('http://localhost:5173')).status).toBe(200);
    expect((await from()).status).toBe(200);
  });

  it('refuses a WebSocket from another origin even with the token, and accepts the UI own', async () => {
    const open = (origin: string) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/api/events?token=${TOKEN}`, { origin });
        ws.on('open', () => {
          ws.close();
          resolve(101);
        });
        ws.on('unexpected-response', (_req, res) => {
          resolve(res.statusCode ?? 0);
          ws.terminate();
        });
        ws.on('error', () => resolve(0));
      });
    expect(await open('http://evil.example')).toBe(403);
    expect(await open(`http://127.0.0.1:${port}`)).toBe(101);
  });
});

describe('a peer whose log is on a full disk', () => {
  it('still answers errors (the error responder logs) and counts the lines it dropped', async () => {
    const fullLog = createLogger({ file: '/dev/full', consoleLevel: 'silent' });
    const mounts: Mount[] = [{ prefix: '/api', router: routes('/api'), errorShape: 'api' }];
    const onFullDisk = createHttpServer({ mounts: () => mounts, uiRoot: join(dir, 'ui'), log: fullLog });
    const fullPort = await listen(onFullDisk, 0, '127.0.0.1');
    try {
      expect((await rawGet(fullPort, '/api/bug')).status).toBe(500);
      expect((await rawGet(fullPort, '/api/disk-full')).status).toBe(507);
      expect((await rawGet(fullPort, '/')).status).toBe(200);
      expect(fullLog.dropped).toBe(2);
    } finally {
      await new Promise((resolve) => onFullDisk.close(resolve));
    }
  });
});
