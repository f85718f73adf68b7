/** The Swarm view of a peer in a private swarm: the peer list comes from GET /api/peers and stays live. */
import { test as base, expect } from '@playwright/test';
import { createSwarmToken } from '../p2p/index.ts';
import type { PeersResponse } from '../swarm/common/api.ts';
import { apiGet, startPeer, type RunningPeer } from './support/peer.ts';

const test = base.extend<object, { swarmPeer: RunningPeer }>({
  swarmPeer: [
    // eslint-disable-next-line no-empty-pattern -- Playwright reads the fixture's dependencies from this pattern
    async ({}, use) => {
      // Loopback only: the test's swarm must not depend on (or disturb) the machine's network.
      const peer = await startPeer(['--swarm-token', createSwarmToken({ name: 'e2e-lab' }), '--listen', '/ip4/127.0.0.1/tcp/0']);
      try {
        await use(peer);
      } finally {
        await peer.stop();
      }
    },
    { scope: 'worker' },
  ],
});

test('lists the swarm’s peers as the control API reports them, this peer first', async ({ page, swarmPeer }, testInfo) => {
  const listed = await apiGet<PeersResponse>(swarmPeer, '/peers');
  expect(listed.swarm).toBe('e2e-lab');
  await page.goto(swarmPeer.uiUrl);
  const panel = page.getByTestId('peers-panel');
  await expect(panel.getByRole('table', { name: 'Peers of swarm e2e-lab' })).toBeVisible();
  const self = panel.locator('[data-testid="peer-row"][data-self="true"]');
  await expect(self).toHaveCount(1);
  await expect(self.locator('code')).toHaveAttribute('title', listed.peerId);
  await expect(self).toContainText('this peer');
  await expect(page.getByTestId('p2p-panel')).toContainText('e2e-lab');
  await testInfo.attach('swarm view in a swarm', { body: await panel.screenshot(), contentType: 'image/png' });
});
