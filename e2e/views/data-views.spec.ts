/**
 * The data views in Chromium against a real peer hosting the tiny model. Episodes are produced through the real
 * gateway (swarm protocol + chat completions), never inserted by hand. A screenshot of each view is attached.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { TestInfo, Page } from '@playwright/test';
import type { EpisodeGroupShare } from '../../swarm/common/api.ts';
import type { EpisodeExport } from '../../swarm/common/timeline/export.ts';
import { formatCount } from '../../renderer/src/format.ts';
import { REPO_ROOT } from '../support/peer.ts';
import { api, expect, test } from './fixtures.ts';

test.describe.configure({ mode: 'serial' });

async function screenshot(page: Page, testInfo: TestInfo, name: string) {
  const file = testInfo.outputPath(`${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  await testInfo.attach(name, { path: file, contentType: 'image/png' });
}

test('episodes arrive live; opening one shows the conversation the agent had', async ({
  page,
  openView,
  produce,
}, testInfo) => {
  await openView('episodes');
  const rows = page.getByTestId('episode-row');
  const before = await rows.count();
  const first = await produce({ turns: 3 });
  const second = await produce({ turns: 2 });
  // No reload: the status event's episode count makes the list refetch what is on screen.
  await expect(rows).toHaveCount(before + 2, { timeout: 20_000 });
  await expect(rows.first()).toHaveAttribute('data-episode-id', second);

  await page.locator(`[data-episode-id="${first}"]`).click();
  await expect(page.getByTestId('episode-detail-id')).toHaveText(first);
  const conversation = page.getByTestId('conversation');
  await expect(conversation).toContainText('You are a calculator agent');
  await expect(conversation).toContainText('tool result 1');
  // The list is keyboard-driven too: focus it, move down, open with Enter.
  await page.getByTestId('episode-scroll').focus();
  await page.keyboard.press('Home');
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('episode-detail-id')).toHaveText(second);
  await screenshot(page, testInfo, 'view-episodes');
});

test('the merge view draws the lanes and calls of the export, with its savings and token details', async ({
  page,
  modelPeer,
  openView,
  produce,
}, testInfo) => {
  // Two repeats of one task: the second shares the task's opening with the first.
  await produce({ turns: 4, taskId: 'merge-view-group' });
  const id = await produce({ turns: 4, taskId: 'merge-view-group' });
  const exported = await api<EpisodeExport>(modelPeer, `/episodes/${id}/export`);
  await openView('episodes');
  await page.locator(`[data-episode-id="${id}"]`).click();
  await page.getByRole('button', { name: 'Merge view' }).click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Timeline');

  await expect(page.getByTestId('merge-lane')).toHaveCount(exported.timelines.length);
  await expect(page.getByTestId('merge-call')).toHaveCount(exported.calls.length);
  const joined = exported.decisions.filter((d) => d.action === 'joined').length;
  await expect(page.locator('[data-testid="merge-call"][data-action="joined"]')).toHaveCount(joined);
  await expect(page.getByTestId('episode-naive-tokens')).toHaveText(
    formatCount(exported.savings.naiveTokens),
  );
  await expect(page.getByTestId('episode-merged-tokens')).toHaveText(
    formatCount(exported.savings.mergedTokens),
  );
  await expect(page.getByTestId('episode-token-ratio')).toHaveText(
    `${exported.savings.tokenRatio.toFixed(2)}×`,
  );
  // What its group shares with it, as the control API reports it.
  const share = await api<EpisodeGroupShare>(modelPeer, `/ui/episodes/${id}/group`);
  expect(share.episodes).toBeGreaterThanOrEqual(2);
  expect(share.sharedTokens).toBeGreaterThan(0);
  await expect(page.getByTestId('group-tree-tokens')).toHaveText(formatCount(share.groupTreeTokens));
  await expect(page.getByTestId('group-merged-tokens')).toHaveText(formatCount(share.groupMergedTokens));

  // Hovering a token shows its text, id and position.
  const canvas = page.getByTestId('merge-canvas');
  const box = (await canvas.boundingBox())!;
  await page.mouse.move(box.x + 5, box.y + 12);
  const tooltip = page.getByTestId('token-tooltip');
  await expect(tooltip).toBeVisible();
  const position = Number(await tooltip.getByTestId('token-position').textContent());
  await expect(tooltip.getByTestId('token-id')).toHaveText(String(exported.timelines[0].tokens[position]));

  // Zoom in with the keyboard down to single tokens; 0 fits the whole episode again.
  const zoom = page.getByTestId('zoom-level');
  const fitted = await zoom.textContent();
  await canvas.focus();
  for (let i = 0; i < 12; i++) await page.keyboard.press('+');
  await expect(zoom).toHaveText('64 px/token');
  await page.keyboard.press('0');
  await expect(zoom).toHaveText(fitted ?? '');

  // Choosing a call with ↓ shows its decision and reason.
  await page.keyboard.press('ArrowDown');
  await expect(page.getByTestId('decision-panel')).toContainText(exported.decisions[0].detail);
  await screenshot(page, testInfo, 'view-timeline');
});

test('drop a script to attach it, hot-swap a new version, pause it', async ({ page, openView }, testInfo) => {
  await openView('clients');
  const scriptPath = path.join(REPO_ROOT, 'examples/guess-the-number/agent.py');
  const script = readFileSync(scriptPath);
  // The browser path: the dropped file's content is uploaded (Electron would send its path instead).
  await page
    .getByTestId('script-input')
    .setInputFiles({ name: 'guess.py', mimeType: 'text/x-python', buffer: script });
  await expect(page.getByTestId('attach-name')).toHaveValue('guess');
  await page
    .getByTestId('attach-tasks-file')
    .setInputFiles(path.join(REPO_ROOT, 'examples/guess-the-number/tasks.jsonl'));
  await page.getByTestId('attach-model').selectOption('tiny');
  await page.getByTestId('attach-submit').click();
  const row = page.locator('[data-testid="client-row"][data-client="guess"]');
  await expect(row.getByTestId('client-version')).toHaveText('v1');
  await expect(page.getByTestId('attach-notice')).toHaveText('Attached guess');

  // A new version dropped on the zone as a real drop event, under the same name: a hot swap with the same tasks.
  await page.getByTestId('drop-zone').evaluate(
    (zone, text) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([text], 'guess.py', { type: 'text/x-python' }));
      zone.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
    },
    `${script.toString('utf8')}\n# v2: same game, new hash\n`,
  );
  await expect(page.getByTestId('attach-submit')).toHaveText('Hot-swap to v2');
  await page.getByTestId('attach-submit').click();
  await expect(row.getByTestId('client-version')).toHaveText('v2');
  await expect(page.getByTestId('attach-notice')).toHaveText('Hot-swapped guess to version 2');

  await row.getByRole('button', { name: 'Pause guess' }).click();
  await expect(row.getByTestId('client-state')).toHaveText('paused');
  await expect(row.getByRole('button', { name: 'Resume guess' })).toBeVisible();
  await screenshot(page, testInfo, 'view-clients');
});

test('a script dropped anywhere on the window opens the attach form with it; anything else is refused', async ({
  page,
  openView,
}) => {
  await openView('episodes');
  const dropOnWindow = (name: string) =>
    page.locator('main').evaluate((target, filename) => {
      const transfer = new DataTransfer();
      transfer.items.add(new File(['console.log(1)'], filename, { type: 'text/javascript' }));
      target.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
    }, name);
  await dropOnWindow('window-agent.mjs');
  await expect(page.getByTestId('drop-zone')).toBeVisible();
  await expect(page.getByTestId('attach-name')).toHaveValue('window-agent');

  await openView('models');
  await dropOnWindow('notes.txt');
  await expect(page.getByTestId('attach-error')).toContainText('notes.txt is not an agent script');
});

test('the models view shows the hosted model with its engine state', async ({ page, openView }, testInfo) => {
  await openView('models');
  await expect(page.getByTestId('model-card')).toContainText('tiny');
  await expect(page.getByTestId('training-panel')).toBeVisible();
  await screenshot(page, testInfo, 'view-models');
});
