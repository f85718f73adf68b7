/**
 * Fixtures of the data-view tests: `modelPeer` is a real headless peer hosting the built-in tiny model
 * (`agentjet node --model builtin:tiny`), one per worker; `produce` runs agent episodes through its gateway.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test as base, expect } from '@playwright/test';
import { startPeerProcess } from '../../electron/peer-process.ts';
import { REPO_ROOT, type RunningPeer } from '../support/peer.ts';
import { runAgentEpisode, type AgentRunOptions } from './gateway-driver.ts';

export const MODEL = 'tiny';

async function startModelPeer(): Promise<RunningPeer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'agentjet-e2e-views-'));
  try {
    const peer = await startPeerProcess({
      appRoot: REPO_ROOT,
      execPath: process.execPath,
      dataDir,
      extraArgs: ['--model', 'builtin:tiny'],
    });
    return {
      ...peer,
      origin: new URL(peer.uiUrl).origin,
      async stop() {
        await peer.stop();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

export const test = base.extend<
  {
    openView: (view: string) => Promise<void>;
    produce: (options: Partial<AgentRunOptions>) => Promise<string>;
  },
  { modelPeer: RunningPeer }
>({
  modelPeer: [
    // eslint-disable-next-line no-empty-pattern -- Playwright reads the fixture's dependencies from this pattern
    async ({}, use) => {
      const peer = await startModelPeer();
      try {
        await use(peer);
      } finally {
        await peer.stop();
      }
    },
    { scope: 'worker', timeout: 90_000 },
  ],
  /** Open the UI the way a user does (the printed URL), then go to a view through the sidebar. */
  openView: async ({ page, modelPeer }, use) => {
    await use(async (view) => {
      await page.goto(modelPeer.uiUrl);
      await expect(page.getByTestId('connection-state')).toHaveAttribute('data-phase', 'live');
      await page.getByRole('navigation', { name: 'Views' }).locator(`[data-view="${view}"]`).click();
    });
  },
  produce: async ({ modelPeer }, use) => {
    let count = 0;
    await use((options) =>
      runAgentEpisode(modelPeer, {
        model: MODEL,
        taskId: `task-${count++ % 2}`,
        turns: 3,
        reward: count % 2,
        ...options,
      }),
    );
  },
});

export { expect };

/** GET from the peer's control API, parsed. */
export async function api<T>(peer: RunningPeer, apiPath: string): Promise<T> {
  const response = await fetch(`${peer.apiUrl}${apiPath}`, {
    headers: { Authorization: `Bearer ${peer.token}` },
  });
  if (!response.ok) throw new Error(`GET ${apiPath}: HTTP ${response.status}`);
  return (await response.json()) as T;
}
