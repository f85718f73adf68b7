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

/** Poll until `check` returns a value (no wall-clock assertion: the test's own timeout bounds it). */
export async function eventually<T>(check: () => T | undefined | false | Promise<T | undefined | false>, intervalMs = 20): Promise<T> {
  while (true) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
