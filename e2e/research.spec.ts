/**
 * The Research view in Chromium against a real headless peer: empty at first, then a study submitted through the
 * control API (the shipped KL-penalty study) appears live in the list, opens on its page, and is stopped there.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { StudySummary } from '../swarm/common/research-api.ts';
import { expect, test } from './fixtures.ts';
import { REPO_ROOT } from './support/peer.ts';
import { quickStudyText } from '../swarm/node/research/testing/quick-study.ts';

test.describe.configure({ mode: 'serial' });

const STUDIES_DIR = path.join(REPO_ROOT, 'examples', 'studies');

test('the Research view starts empty and is reached from the sidebar', async ({ page, openUi }) => {
  await openUi();
  await page.getByRole('navigation', { name: 'Views' }).getByRole('button', { name: 'Research' }).click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Research');
  await expect(page).toHaveURL(/#\/research$/);
  await expect(page.getByTestId('studies-panel')).toContainText('No study yet');
  await expect(page.getByTestId('studies-total')).toHaveText('0');
});

test('a submitted study shows in the list as running, opens, and stops from its page', async ({
  page,
  peer,
  openUi,
}) => {
  await openUi();
  await page.getByRole('navigation', { name: 'Views' }).getByRole('button', { name: 'Research' }).click();
  await expect(page.getByTestId('studies-total')).toHaveText('0');

  const text = readFileSync(path.join(STUDIES_DIR, 'kl-penalty.study.yaml'), 'utf8');
  const response = await fetch(`${peer.apiUrl}/studies`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${peer.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ text, baseDir: STUDIES_DIR }),
  });
  expect(response.status).toBe(201);
  const study = (await response.json()) as StudySummary;

  // The `study` event brings the row without a reload.
  const row = page.locator(`[data-testid="study-row"][data-study-id="${study.id}"]`);
  await expect(row).toContainText('kl-penalty');
  await expect(row.getByTestId('study-status')).toHaveAttribute('data-study-status', /planning|running/);

  await row.getByTestId('study-link').click();
  await expect(page.getByTestId('study-page')).toBeVisible();
  await expect(page.getByTestId('study-question')).toContainText('KL penalty');
  await expect(page.getByTestId('study-criterion')).toContainText("kl-0.05's metric exceeds kl-0's");
  await expect(page.getByTestId('study-run-row')).toHaveCount(6);

  await page.getByTestId('study-stop').click();
  await expect(page.getByTestId('study-header').getByTestId('study-status')).toHaveAttribute(
    'data-study-status',
    /stopping|stopped/,
  );
  await expect(page.getByTestId('study-resume')).toBeEnabled({ timeout: 30_000 });
  await expect(page.getByTestId('study-action-error')).toHaveCount(0);
});

const quickStudy = () =>
  quickStudyText({
    name: 'quick',
    question: 'Does one step at the default rate beat a rate of 0?',
    hypothesis: 'Perhaps; one step is little.',
    decision: '{ kind: difference, better: default, than: zero, minDifference: 0 }',
  });

test('a finished study shows its arms, curves, decision, threats and report', async ({ page, peer, openUi }) => {
  test.setTimeout(600_000);
  const response = await fetch(`${peer.apiUrl}/studies`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${peer.token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ text: quickStudy(), baseDir: STUDIES_DIR }),
  });
  expect(response.status).toBe(201);
  const study = (await response.json()) as StudySummary;
  await openUi();
  await page.goto(`${peer.uiUrl.split('#')[0]}#/research/${encodeURIComponent(study.id)}&token=${peer.token}`);
  await expect(page.getByTestId('study-page')).toBeVisible();
  await expect(page.getByTestId('study-decision-panel')).toBeVisible({ timeout: 540_000 });
  await expect(page.getByTestId('study-arm-row')).toHaveCount(2);
  await expect(page.getByTestId('study-decision-statement')).toContainText('default − zero');
  await expect(page.getByTestId('study-threats')).toContainText('Few seeds');
  await expect(page.getByTestId('study-chart-reward')).toBeVisible();
  await expect(page.getByTestId('study-run-row')).toHaveCount(4);
  await expect(page.locator('[data-testid="study-run-row"][data-status="done"]')).toHaveCount(4);
});
