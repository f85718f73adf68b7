/**
 * Fixtures of the data-view tests: `modelPeer` is a real headless peer hosting the built-in tiny model
 * (`agentjet node --model builtin:tiny`), one per worker; `produce` runs agent episodes through its gateway.
 */
import { test as base, expect } from '@playwright/test';
import { startPeer, type RunningPeer } from '../support/peer.ts';
import { runAgentEpisode, type AgentRunOptions } from './gateway-driver.ts';

export const MODEL = 'tiny';

function startModelPeer(): Promise<RunningPeer> {
  return startPeer(['--model', 'builtin:tiny']);
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
