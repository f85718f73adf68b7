/** Playwright fixtures: `peer` is one real headless peer per worker, shared by the tests of a file. */
import { test as base, expect } from '@playwright/test';
import { startPeer, type RunningPeer } from './support/peer.ts';

export const test = base.extend<{ openUi: () => Promise<void> }, { peer: RunningPeer }>({
  peer: [
    // eslint-disable-next-line no-empty-pattern -- Playwright reads the fixture's dependencies from this pattern
    async ({}, use) => {
      const peer = await startPeer();
      try {
        await use(peer);
      } finally {
        await peer.stop();
      }
    },
    { scope: 'worker' },
  ],
  /** Open the UI the way a user does: the URL the peer printed, token in the fragment. */
  openUi: async ({ page, peer }, use) => {
    await use(async () => {
      await page.goto(peer.uiUrl);
    });
  },
});

export { expect };
