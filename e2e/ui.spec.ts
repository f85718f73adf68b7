/** The UI in Chromium against a real headless peer: what a user sees when they open the URL the peer printed. */
import type { StatusPayload } from '../swarm/common/api.ts';
import { VIEWS } from '../electron/common/views.ts';
import { expect, test } from './fixtures.ts';
import { apiGet } from './support/peer.ts';

test('the page loads, takes the token out of the address bar and shows the peer live', async ({ page, peer, openUi }) => {
  await openUi();
  await expect(page.getByRole('heading', { level: 1, name: 'Swarm' })).toBeVisible();
  await expect(page.getByTestId('connection-state')).toHaveAttribute('data-phase', 'live');
  expect(new URL(page.url()).hash).not.toContain('token');

  // The token was kept for this tab: a reload stays connected without it in the URL.
  await page.reload();
  await expect(page.getByTestId('connection-state')).toHaveAttribute('data-phase', 'live');
  expect(peer.token.length).toBeGreaterThan(0);
});

test('the Swarm view shows the node id, version and URLs the control API reports', async ({ page, peer, openUi }) => {
  const status = await apiGet<StatusPayload>(peer, '/status');
  await openUi();
  await expect(page.getByTestId('peer-node-id')).toHaveText(status.nodeId);
  await expect(page.getByTestId('peer-version')).toHaveText(status.version);
  expect(status.nodeId).toBe(peer.nodeId);
  // URLs the user copies come from the peer, not from the page's guess.
  await expect(page.getByTestId('endpoints-panel')).toContainText(status.urls.gateway);
  await expect(page.getByTestId('endpoints-panel')).toContainText(status.urls.api);
  // A fresh peer hosts no model: the panel says how to start one instead of showing an empty table.
  if (status.models.length === 0) {
    await expect(page.getByTestId('models-panel')).toContainText('No models hosted on this peer');
    await expect(page.getByTestId('models-panel')).toContainText('agentjet serve --model builtin:tiny');
  }
  // Not in a swarm: the peers panel says how to create or join one.
  expect(status.p2p.enabled).toBe(false);
  await expect(page.getByTestId('peers-panel')).toContainText('This peer is not in a swarm');
  await expect(page.getByTestId('peers-panel')).toContainText('agentjet swarm create');
});

test('uptime ticks live over the WebSocket', async ({ page, openUi }) => {
  await openUi();
  const uptime = page.getByTestId('stat-uptime');
  await expect(uptime).toHaveText(/\d+s|\d+m/);
  const first = await uptime.textContent();
  // No page reload and no polling in the UI: only pushed status events can change this text.
  await expect(uptime).not.toHaveText(first ?? '');
});

test('every view can be reached with the keyboard, with visible focus; a screenshot of each is attached', async ({ page, openUi }, testInfo) => {
  await openUi();
  await expect(page.getByTestId('connection-state')).toHaveAttribute('data-phase', 'live');

  // Tab: first the skip link, then the first sidebar entry.
  await page.keyboard.press('Tab');
  await expect(page.getByRole('link', { name: 'Skip to content' })).toBeFocused();
  await page.keyboard.press('Tab');
  const nav = page.getByRole('navigation', { name: 'Views' });
  await expect(nav.getByRole('button', { name: 'Swarm' })).toBeFocused();
  await expect(page.locator('.nav__item:focus-visible')).toHaveCount(1);

  for (const [index, view] of VIEWS.entries()) {
    if (index > 0) await page.keyboard.press('ArrowDown');
    await expect(nav.getByRole('button', { name: view.label })).toBeFocused();
    await expect(nav.getByRole('button', { name: view.label })).toHaveAttribute('aria-current', 'page');
    await expect(page.getByRole('heading', { level: 1 })).toHaveText(view.label);
    await expect(page).toHaveURL(new RegExp(`#/${view.id}$`));
    const file = testInfo.outputPath(`view-${view.id}.png`);
    await page.screenshot({ path: file, fullPage: true });
    await testInfo.attach(`view-${view.id}`, { path: file, contentType: 'image/png' });
  }

  // Wraps around; Home goes to the first entry.
  await page.keyboard.press('ArrowDown');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(VIEWS[0].label);
  await page.keyboard.press('End');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(VIEWS[VIEWS.length - 1].label);
  await page.keyboard.press('Home');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(VIEWS[0].label);

  // Tab only moves focus; Enter shows the focused entry's view.
  await page.keyboard.press('Tab');
  await expect(nav.getByRole('button', { name: VIEWS[1].label })).toBeFocused();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(VIEWS[0].label);
  await page.keyboard.press('Enter');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText(VIEWS[1].label);
});

test('a wrong token shows a clear "not authorised" state', async ({ page, peer }) => {
  await page.goto(`${peer.origin}/#token=not-the-right-token`);
  const gate = page.getByTestId('not-authorised');
  await expect(gate).toBeVisible();
  await expect(gate.getByRole('heading', { name: 'Not authorised' })).toBeVisible();
  await expect(page.getByTestId('peer-node-id')).toHaveCount(0);
});

test('without any token the page says where to get one', async ({ page, peer }) => {
  await page.goto(`${peer.origin}/`);
  await expect(page.getByTestId('no-token')).toBeVisible();
  await expect(page.getByTestId('no-token')).toContainText('agentjet node');
});

test('the theme follows the system: dark when the system is dark', async ({ page, openUi }, testInfo) => {
  await page.emulateMedia({ colorScheme: 'light' });
  await openUi();
  await expect(page.getByTestId('peer-node-id')).toBeVisible();
  const lightBackground = await page.evaluate<string>('getComputedStyle(document.body).backgroundColor');

  await page.emulateMedia({ colorScheme: 'dark' });
  const darkBackground = await page.evaluate<string>('getComputedStyle(document.body).backgroundColor');
  expect(darkBackground).not.toBe(lightBackground);
  expect(luminance(darkBackground)).toBeLessThan(luminance(lightBackground));

  const file = testInfo.outputPath('view-swarm-dark.png');
  await page.screenshot({ path: file, fullPage: true });
  await testInfo.attach('view-swarm-dark', { path: file, contentType: 'image/png' });
});

/** Relative luminance-ish of a CSS `rgb(r, g, b)` string: enough to tell dark from light. */
function luminance(rgb: string): number {
  const [r, g, b] = (rgb.match(/\d+/g) ?? []).map(Number);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
