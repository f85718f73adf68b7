/** Reading JSON bodies with a size cap, and writing JSON answers. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { badRequest, payloadTooLarge } from './errors.ts';

/** Default cap on request bodies; routes that take uploads pass a larger one. */
export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024;

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

export async function readJson(req: IncomingMessage, limit = DEFAULT_BODY_LIMIT): Promise<unknown> {
  const body = await readBody(req, limit);
  if (body.length === 0) throw badRequest('request body is empty; send a JSON object');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw badRequest(`request body is not valid JSON: ${(err as Error).message}`);
  }
}

/** Parse and validate a JSON body; the first schema issue becomes a 400 naming the field. */
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
