/** Bearer-token checks for the control API (constant-time, so the token cannot be guessed byte by byte). */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { unauthorized } from '../http/errors.ts';

export function tokensEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function bearerToken(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (!header) return undefined;
  const m = /^Bearer\s+(.+)$/i.exec(header);
  return m?.[1].trim();
}

export function requireControlToken(req: IncomingMessage, token: string): void {
  const given = bearerToken(req);
  if (!given) throw unauthorized('missing bearer token; send Authorization: Bearer <token> (printed by `agentjet node`)');
  if (!tokensEqual(given, token)) throw unauthorized('wrong control-API token; use the one this peer printed at start');
}
