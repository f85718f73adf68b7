/**
 * Whether and how a peer joins a swarm. P2P is off unless a swarm is configured: a token given at start
 * (`--swarm-token`) or one stored by `agentjet swarm join` in `<dataDir>/p2p/swarm.json`; `--no-p2p` wins over both.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseSwarmToken, type SwarmToken } from '../../../p2p/swarm-token/token.ts';
import { SwarmConfigError } from './errors.ts';

/** What PeerOptions.p2p accepts (CLI flags and tests). */
export interface P2pOptions {
  /** false turns p2p off even when a token is stored (`--no-p2p`). */
  enabled?: boolean;
  /** A join token (`agentjet swarm create`); overrides the stored one. */
  swarmToken?: string;
  /** Multiaddrs to listen on (default: TCP and WebSockets on every interface, free ports). */
  listen?: string[];
  /** Extra bootstrap multiaddrs, beyond the token's. */
  bootstrap?: string[];
  /** LAN discovery (default true; tests turn it off). */
  mdns?: boolean;
  /** Hosted-model names whose published weights this peer fetches, verifies and keeps; '*' = every model. */
  mirror?: string[];
  /** Presence period (ms); default p2p's. */
  presenceIntervalMs?: number;
  /** How long a dropped server peer may take to come back before its remote episodes are aborted (ms). */
  peerGraceMs?: number;
}

export interface ResolvedP2p {
  swarm: SwarmToken;
  listen?: string[];
  bootstrap: string[];
  mdns: boolean;
  mirror: string[];
  presenceIntervalMs?: number;
  peerGraceMs?: number;
}

export function swarmFile(p2pDir: string): string {
  return join(p2pDir, 'swarm.json');
}

/** Stores a join token for the next start (validated first; InvalidSwarmTokenError when malformed). */
export function storeSwarmToken(p2pDir: string, token: string): SwarmToken {
  const parsed = parseSwarmToken(token);
  const path = swarmFile(p2pDir);
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  // The token carries the swarm key: readable by this user only.
  writeFileSync(tmp, JSON.stringify({ token }, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, path);
  return parsed;
}

export function readStoredSwarmToken(p2pDir: string): string | undefined {
  const path = swarmFile(p2pDir);
  if (!existsSync(path)) return undefined;
  try {
    const { token } = JSON.parse(readFileSync(path, 'utf8')) as { token?: unknown };
    if (typeof token === 'string') return token;
  } catch {
    // fall through to the clear error below
  }
  throw new SwarmConfigError(`${path} is not a stored swarm token; run agentjet swarm join TOKEN again`);
}

/** undefined = p2p off. */
export function resolveP2p(p2pDir: string, options: P2pOptions = {}): ResolvedP2p | undefined {
  if (options.enabled === false) return undefined;
  const token = options.swarmToken ?? readStoredSwarmToken(p2pDir);
  if (!token) return undefined;
  const swarm = parseSwarmToken(token);
  return {
    swarm,
    listen: options.listen,
    bootstrap: [...swarm.bootstrap, ...(options.bootstrap ?? [])],
    mdns: options.mdns ?? true,
    mirror: options.mirror ?? [],
    presenceIntervalMs: options.presenceIntervalMs,
    peerGraceMs: options.peerGraceMs,
  };
}
