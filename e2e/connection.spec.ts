/** Losing the peer is shown honestly: the badge leaves "Live" and counts down to the next retry. */
import { expect, test } from '@playwright/test';
import { startPeer } from './support/peer.ts';

test('stopping the peer shows "disconnected" with a retry countdown', async ({ page }) => {
  const peer = await startPeer();
  try {
    await page.goto(peer.uiUrl);
    const badge = page.getByTestId('connection-state');
    await expect(badge).toHaveAttribute('data-phase', 'live');
    await peer.stop();
    await expect(badge).toHaveAttribute('data-phase', 'disconnected');
    await expect(badge).toContainText(/retry in \d+s|retrying/);
    // The last known status stays on screen, marked as not live, with a way to retry at once.
    await expect(page.getByTestId('peer-node-id')).toHaveText(peer.nodeId);
    await expect(page.getByTestId('stale-banner')).toContainText('Not live');
    await page.getByRole('button', { name: 'Retry now' }).click();
    await expect(badge).toHaveAttribute('data-phase', 'disconnected');
  } finally {
    await peer.stop();
  }
});
