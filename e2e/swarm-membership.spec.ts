/**
 * Joining a swarm from the Swarm view, against a real peer started off any swarm: create one (p2p starts without a
 * restart, the join token is shown, this peer appears in the peer list), leave it, and paste a bad token.
 */
import type { Page, TestInfo } from '@playwright/test';
import type { SwarmMembership } from '../swarm/common/api.ts';
import { expect, test as base } from '@playwright/test';
import { apiGet, startPeer, type RunningPeer } from './support/peer.ts';

const test = base.extend<object, { offSwarmPeer: RunningPeer }>({
  offSwarmPeer: [
    // eslint-disable-next-line no-empty-pattern -- Playwright reads the fixture's dependencies from this pattern
    async ({}, use) => {
      // Loopback only, for the swarm the test creates: nothing leaves the machine.
      const peer = await startPeer(['--listen', '/ip4/127.0.0.1/tcp/0']);
      try {
        await use(peer);
      } finally {
        await peer.stop();
      }
    },
    { scope: 'worker' },
  ],
});

test.describe.configure({ mode: 'serial' });

async function screenshot(page: Page, testInfo: TestInfo, name: string) {
  const file = testInfo.outputPath(`${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  await testInfo.attach(name, { path: file, contentType: 'image/png' });
}

test('creates a swarm from the UI: the token is shown and this peer is listed', async ({ page, offSwarmPeer }, testInfo) => {
  await page.goto(offSwarmPeer.uiUrl);
  const network = page.getByTestId('p2p-panel');
  await expect(network.getByTestId('swarm-name')).toHaveText('None joined');
  await expect(page.getByTestId('peers-panel')).toContainText('This peer is not in a swarm');

  await network.getByLabel('New swarm name').fill('ui-lab');
  await network.getByRole('button', { name: 'Create swarm' }).click();

  const token = network.getByTestId('swarm-token');
  await expect(token).toHaveText(/^ajs1\./);
  const membership = await apiGet<SwarmMembership>(offSwarmPeer, '/swarm');
  expect(membership).toMatchObject({ joined: true, swarm: 'ui-lab' });
  await expect(token).toHaveText(membership.token!);
  await expect(network.getByRole('button', { name: 'Copy join token' })).toBeVisible();
  await expect(network.getByTestId('swarm-name')).toHaveText('ui-lab');

  const peers = page.getByTestId('peers-panel');
  await expect(peers.getByRole('table', { name: 'Peers of swarm ui-lab' })).toBeVisible();
  const self = peers.locator('[data-testid="peer-row"][data-self="true"]');
  await expect(self).toHaveCount(1);
  await expect(self.locator('code')).toHaveAttribute('title', membership.peerId!);
  await screenshot(page, testInfo, 'swarm-created');

  await network.getByRole('button', { name: 'Leave swarm' }).click();
  await network.getByRole('button', { name: 'Leave', exact: true }).click();
  await expect(network.getByTestId('swarm-name')).toHaveText('None joined');
  await expect(peers).toContainText('This peer is not in a swarm');
  expect((await apiGet<SwarmMembership>(offSwarmPeer, '/swarm')).joined).toBe(false);
});

test('a bad join token shows the error and changes nothing', async ({ page, offSwarmPeer }, testInfo) => {
  await page.goto(offSwarmPeer.uiUrl);
  const network = page.getByTestId('p2p-panel');
  await network.getByLabel('Join token from another peer').fill('ajs1.not-really-a-token');
  await network.getByRole('button', { name: 'Join swarm' }).click();
  const error = network.getByTestId('swarm-error');
  await expect(error).toHaveAttribute('data-error-name', 'InvalidSwarmTokenError');
  await expect(error).toBeVisible();
  await expect(network.getByTestId('swarm-name')).toHaveText('None joined');
  expect((await apiGet<SwarmMembership>(offSwarmPeer, '/swarm')).joined).toBe(false);
  await screenshot(page, testInfo, 'swarm-bad-token');
});
