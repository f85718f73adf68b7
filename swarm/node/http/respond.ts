/**
 * Reading JSON bodies at the edge — a size cap, a nesting cap, and JSON's content type — and writing JSON answers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { HttpError, badRequest, payloadTooLarge, unsupportedMediaType } from './errors.ts';

/** Default cap on request bodies; routes that take uploads pass a larger one. */
export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024;

/**
 * Deepest nesting of arrays and objects a JSON body may have. What we store is walked recursively later (zod,
 * JSON.stringify, SQLite's JSON functions), and ~10,000 levels overflow the stack there: a 500 from deep inside,
 * after the work. Real bodies are shallow — a chat request with a tool's JSON-Schema parameters is about 10 levels,
 * end metrics 2-3 — so 64 leaves room for any honest schema.
 */
export const MAX_JSON_DEPTH = 64;

export async function readBody(req: IncomingMessage, limit = DEFAULT_BODY_LIMIT): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) {
    req.resume();
    throw payloadTooLarge(limit);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume();
      throw payloadTooLarge(limit);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Read a JSON body: 415 unless it is sent as JSON, 413 past `limit`, 400 when malformed or nested too deep. */
export async function readJson(req: IncomingMessage, limit = DEFAULT_BODY_LIMIT): Promise<unknown> {
  requireJsonContentType(req);
  return parseJsonBody(await readBody(req, limit));
}

/**
 * A body is JSON only when it says so. Browsers send `text/plain` (and form types) cross-site without asking the
 * server first; parsing those as JSON would let any web page post to this peer. Every client of ours — the openai
 * SDKs, the CLI (cli/peer-client.ts), the UI (renderer), the runner and the p2p relays — sends application/json.
 * A request with no body needs no type (it then fails as an empty body, with that reason).
 */
export function requireJsonContentType(req: IncomingMessage): void {
  const type = req.headers['content-type'];
  if (type !== undefined && isJsonMediaType(type)) return;
  if (type === undefined && !hasBody(req)) return;
  req.resume();
  throw unsupportedMediaType(type ?? 'no Content-Type');
}

/** `application/json` or a `+json` type, with any parameters (`; charset=utf-8`). */
export function isJsonMediaType(contentType: string): boolean {
  const essence = contentType.split(';')[0].trim().toLowerCase();
  return essence === 'application/json' || (essence.startsWith('application/') && essence.endsWith('+json'));
}

function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** Parse a JSON body read by readBody (the gateway reads first, to time the parse on its own). */
export function parseJsonBody(body: Buffer): unknown {
  if (body.length === 0) throw badRequest('request body is empty; send a JSON object');
  const depth = jsonDepthExceeds(body, MAX_JSON_DEPTH);
  if (depth !== undefined) {
    throw new HttpError(400, 'JsonTooDeepError', `request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels (at byte ${depth})`, {
      code: 'json_too_deep',
    });
  }
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw badRequest(`request body is not valid JSON: ${(err as Error).message}`);
  }
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The offset where JSON text first nests deeper than `max`, or undefined. One pass over the bytes, before parsing:
 * brackets inside strings do not count. Works on UTF-8 directly: quotes, backslashes and brackets are ASCII, never
 * part of a multi-byte character. Malformed text is left to JSON.parse.
 */
export function jsonDepthExceeds(bytes: Uint8Array, max: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) {
      inString = true;
    } else if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      if (++depth > max) return i;
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
      depth--;
    }
  }
  return undefined;
}

/** Read (as readJson) and validate a JSON body; the first schema issue becomes a 400 naming the field. */
export async function readValidated<T extends z.ZodType>(
  req: IncomingMessage,
  schema: T,
  limit = DEFAULT_BODY_LIMIT,
): Promise<z.infer<T>> {
  return validate(schema, await readJson(req, limit));
}

export function validate<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue.path.join('.') || undefined;
  throw badRequest(field ? `${field}: ${issue.message}` : issue.message, field);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}
