/** Test helpers: real nodes on loopback, each with its own temp data dir, stopped and removed afterwards. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSwarmNode } from '../node/node.ts';
import type { SwarmNode, SwarmNodeOptions } from '../node/node.ts';

export const LOOPBACK_LISTEN = ['/ip4/127.0.0.1/tcp/0'];

export interface TestNodes {
  start(options?: Partial<SwarmNodeOptions>): Promise<SwarmNode>;
  tempDir(): Promise<string>;
  cleanup(): Promise<void>;
}

export function testNodes(): TestNodes {
  const nodes: SwarmNode[] = [];
  const dirs: string[] = [];
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'agentjet-p2p-'));
    dirs.push(dir);
    return dir;
  };
  return {
    tempDir,
    async start(options = {}) {
      const node = await createSwarmNode({
        dataDir: options.dataDir ?? (await tempDir()),
        listen: LOOPBACK_LISTEN,
        mdns: false,
        presence: { intervalMs: 200, ttlMs: 1_000 },
        ...options,
      });
      nodes.push(node);
      return node;
    },
    async cleanup() {
      await Promise.allSettled(nodes.map((n) => n.stop()));
      await Promise.allSettled(dirs.map((d) => rm(d, { recursive: true, force: true })));
      nodes.length = 0;
      dirs.length = 0;
    },
  };
}

/** How long `eventually` polls before it gives up: well inside the test timeout, so the failure says what it waited for. */
export const EVENTUALLY_TIMEOUT_MS = 60_000;

export class NeverHappenedError extends Error {
  override name = 'NeverHappenedError';
}

/**
 * Polls until `check` returns a value; after `timeoutMs` it fails with NeverHappenedError naming what did not happen
 * (`what`, or the check's own source). No wall-clock assertion: the deadline only turns a hang into a clear failure.
 */
export async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  options: number | { what?: string; intervalMs?: number; timeoutMs?: number } = {},
): Promise<T> {
  const { what, intervalMs = 20, timeoutMs = EVENTUALLY_TIMEOUT_MS } = typeof options === 'number' ? { intervalMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  while (true) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new NeverHappenedError(`waited ${timeoutMs} ms and this never held: ${what ?? check.toString()}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
