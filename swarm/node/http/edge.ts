/**
 * Checks every request passes before any route sees it: a request target that parses, a Host this peer answers to,
 * and (on the APIs) an Origin that is this peer's own. All of them throw HttpErrors; the server renders them.
 */
import type { IncomingMessage } from 'node:http';
import { HttpError } from './errors.ts';

/** Names that always mean this machine. `[::1]` is kept without its brackets, as URL.hostname spells it bare. */
const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '::1'];
const WILDCARD_ADDRESSES = ['0.0.0.0', '::'];

/**
 * The request's URL. Origin-form targets (`/path?q`) are taken as a path even when they start with `//`;
 * absolute-form ones (`http://host/path`, which proxies send) are parsed as URLs. Anything else is a 400.
 */
export function parseRequestTarget(target: string | undefined): URL {
  const raw = target ?? '/';
  try {
    // Prefixing keeps `//[` a path: as a relative URL it would be an authority, and an invalid one.
    if (raw.startsWith('/')) return new URL(`http://localhost${raw}`);
    if (/^https?:\/\//i.test(raw)) return new URL(raw);
  } catch {
    // Falls through to the 400 below.
  }
  throw new HttpError(400, 'InvalidRequestError', 'the request target is not a valid path or http URL', {
    code: 'invalid_request_target',
  });
}

/**
 * The Host allow-list (DNS rebinding: a page on evil.example whose name resolves to 127.0.0.1 reaches this peer
 * with `Host: evil.example`) and the Origin check (a page on another site using a browser as its client).
 */
export class HostPolicy {
  private readonly names: Set<string>;

  /** `allowedHosts`: names besides loopback that clients use for this peer (the --host it listens on, a LAN name). */
  constructor(allowedHosts: readonly string[] = []) {
    // A wildcard listen address is no name; the connection's own address (below) covers it.
    const names = allowedHosts.map(normalizeHostname).filter((n) => !WILDCARD_ADDRESSES.includes(n));
    this.names = new Set([...LOOPBACK_HOSTS, ...names]);
  }

  /**
   * Any port: the peer's own port is only known after listen, and a dev server (Vite) on another port proxies to it.
   * The address the connection arrived on is allowed too, so a peer listening on 0.0.0.0 answers `Host: <its LAN IP>`
   * (an IP literal in Host cannot be a rebinding: the browser was pointed at that address itself).
   */
  allows(hostname: string, req: IncomingMessage): boolean {
    const name = normalizeHostname(hostname);
    if (this.names.has(name)) return true;
    const local = req.socket.localAddress;
    return local !== undefined && normalizeHostname(local) === name;
  }

  /** 421 unless the Host header (and an absolute-form target's host) is one this peer answers to. */
  checkHost(req: IncomingMessage, url: URL, absoluteTarget: boolean): void {
    const header = req.headers.host;
    // HTTP/1.0 clients may send no Host; browsers always send one, so a missing Host is no rebinding.
    const hosts = [header === undefined ? undefined : hostnameOf(header), absoluteTarget ? url.hostname : undefined];
    for (const host of hosts) {
      if (host === undefined) continue;
      if (host === null || !this.allows(host, req)) {
        throw new HttpError(421, 'HostNotAllowedError', 'this peer does not answer to that Host name; use 127.0.0.1, localhost or a name given with allowedHosts', {
          code: 'host_not_allowed',
        });
      }
    }
  }

  /**
   * 403 when a browser on another site sends the request. No Origin is fine: the CLI, the SDKs and agent scripts send
   * none. The peer's own UI is same-origin, so its Origin names an allowed host.
   */
  checkOrigin(req: IncomingMessage): void {
    const origin = req.headers.origin;
    if (origin === undefined) return;
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      // `null` (a sandboxed or file:// page) and other non-URLs fall through to the 403.
    }
    if (url && (url.protocol === 'http:' || url.protocol === 'https:') && this.allows(url.hostname, req)) return;
    throw new HttpError(403, 'OriginNotAllowedError', 'requests from web pages of other origins are refused; call this API from the peer\'s own UI or without a browser', {
      code: 'origin_not_allowed',
    });
  }
}

/** `Host` is `name[:port]` or `[v6][:port]`; null when it is neither. */
export function hostnameOf(hostHeader: string): string | null {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::\d*)?$/.exec(hostHeader.trim());
  return m ? m[1] : null;
}

/** Lower case, no brackets around IPv6, no trailing dot, IPv4-mapped IPv6 as IPv4 (a dual-stack socket's address). */
function normalizeHostname(name: string): string {
  let n = name.trim().toLowerCase();
  if (n.startsWith('[') && n.endsWith(']')) n = n.slice(1, -1);
  if (n.endsWith('.')) n = n.slice(0, -1);
  if (n.startsWith('::ffff:') && n.includes('.')) n = n.slice('::ffff:'.length);
  return n;
}
