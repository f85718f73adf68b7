/**
 * Training runs in Chromium against real peers on one data dir: a run of the built-in model at one learning rate,
 * the peer restarted with `--new-run` at another, then restarted without a model. Steps come from episodes
 * driven through the real gateway; the store is read back with SQLite to check the exports against it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import type { RunStep } from '../swarm/common/api.ts';
import type { RunSummary } from '../swarm/common/runs-api.ts';
import { startPeerProcess, type PeerProcess } from '../electron/peer-process.ts';
import { dataPaths } from '../swarm/node/paths.ts';
import { openStoreReadOnly } from '../swarm/node/store/read-only.ts';
import { listTrainSteps } from '../swarm/node/store/train-steps.ts';
import { REPO_ROOT } from './support/peer.ts';
import { runAgentEpisode } from './views/gateway-driver.ts';

test.describe.configure({ mode: 'serial' });

const MODEL = 'tiny';
/** Two groups of two per step, a checkpoint each step: a step every four episodes. */
const TRAINING = ['--batch-tasks', '2', '--group-size', '2', '--checkpoint-every', '1'];

let dataDir: string;
let peer: PeerProcess | null = null;

test.beforeAll(() => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'agentjet-e2e-runs-'));
});
test.afterAll(async () => {
  await peer?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function restart(extraArgs: string[]): Promise<PeerProcess> {
  await peer?.stop();
  peer = await startPeerProcess({ appRoot: REPO_ROOT, execPath: process.execPath, dataDir, extraArgs });
  return peer;
}

const gatewayPeer = (p: PeerProcess) => ({ origin: new URL(p.uiUrl).origin, token: p.token });

async function api<T>(p: PeerProcess, apiPath: string): Promise<T> {
  const response = await fetch(`${p.apiUrl}${apiPath}`, { headers: { Authorization: `Bearer ${p.token}` } });
  expect(response.status, apiPath).toBe(200);
  return (await response.json()) as T;
}

async function text(p: PeerProcess, apiPath: string): Promise<string> {
  const response = await fetch(`${p.apiUrl}${apiPath}`, { headers: { Authorization: `Bearer ${p.token}` } });
  expect(response.status, apiPath).toBe(200);
  return response.text();
}

/** `steps` optimizer steps, each from two groups whose rewards differ (and differ from step to step). */
async function train(p: PeerProcess, steps: number): Promise<void> {
  const start = (await api<{ step: number }>(p, `/models/${MODEL}/training`)).step;
  for (let k = 0; k < steps; k++) {
    for (const [task, reward] of [['a', k + 1], ['a', 0], ['b', 1], ['b', 0]] as const) {
      await runAgentEpisode(gatewayPeer(p), { model: MODEL, taskId: `${task}-${k}`, turns: 1, reward, maxTokens: 4 });
    }
    await expect.poll(async () => (await api<{ step: number }>(p, `/models/${MODEL}/training`)).step, { timeout: 60_000 }).toBe(start + k + 1);
  }
}

/** Groups whose episodes all get the same reward: no advantage, left out of every batch. */
async function uniformGroups(p: PeerProcess, groups: number): Promise<void> {
  for (let g = 0; g < groups; g++) {
    for (let i = 0; i < 2; i++) await runAgentEpisode(gatewayPeer(p), { model: MODEL, taskId: `same-${g}`, turns: 1, reward: 1, maxTokens: 4 });
  }
}

async function openRuns(page: Page, p: PeerProcess): Promise<void> {
  await page.goto(p.uiUrl);
  await expect(page.getByTestId('connection-state')).toHaveAttribute('data-phase', 'live');
  await page.getByRole('navigation', { name: 'Views' }).locator('[data-view="runs"]').click();
}

const chartCanvas = (page: Page, testId: string) => page.getByTestId(testId).locator('canvas').first();

test('two runs at different learning rates: kept, compared with lr highlighted, exported as stored, browsable after a restart', async ({ page }) => {
  test.setTimeout(300_000);

  await test.step('run 1 at lr 1e-3', async () => {
    const first = await restart(['--model', 'builtin:tiny', ...TRAINING, '--lr', '1e-3', '--run-name', 'lr-high']);
    await train(first, 3);
  });

  const second = await test.step('run 2, fresh, at lr 1e-4, with mostly uniform groups', async () => {
    const p = await restart(['--model', 'builtin:tiny', ...TRAINING, '--lr', '1e-4', '--new-run', '--run-name', 'lr-low']);
    await train(p, 3);
    await uniformGroups(p, 10);
    return p;
  });

  const runs = (await api<{ runs: RunSummary[] }>(second, '/runs')).runs;
  expect(runs.map((r) => [r.name, r.steps, r.lastStep])).toEqual([
    ['lr-low', 3, 3],
    ['lr-high', 3, 3],
  ]);
  const [low, high] = runs;

  await test.step('the compare view overlays both and highlights lr', async () => {
    await openRuns(page, second);
    const rows = page.getByTestId('run-row');
    await expect(rows).toHaveCount(2);
    for (const id of [low.id, high.id]) await page.locator(`[data-testid="run-row"][data-run-id="${id}"]`).getByTestId('run-select').check();
    await page.getByTestId('runs-compare').click();
    const config = page.getByTestId('compare-config');
    await expect(config.locator('[data-key="train.learningRate"]')).toHaveAttribute('data-differs', 'true');
    await expect(config.locator('[data-key="groupSize"]')).toHaveAttribute('data-differs', 'false');
    await expect(page.getByTestId('compare-legend')).toContainText('lr-high');
    await expect(page.getByTestId('compare-legend')).toContainText('lr-low');
    await expect(page.getByTestId('compare-charts').getByTestId('chart-reward')).toBeVisible();
  });

  await test.step('the run page shows the resolved config and the discarded-share warning', async () => {
    await page.goto(`${second.uiUrl.split('#')[0]}#/runs/${low.id}&token=${second.token}`);
    const config = page.getByTestId('run-config');
    await expect(config.locator('[data-key="train.learningRate"]')).toHaveAttribute('data-changed', 'true');
    await expect(config.locator('[data-key="train.learningRate"]')).toContainText(/0\.0001|1e-4/);
    // Resolved: keys never given on the command line are there with their defaults.
    await expect(config.locator('[data-key="train.clipHigh"]')).toContainText('0.2');
    await expect(page.locator('[data-testid="run-warning"][data-code="mostly_discarded"]')).toBeVisible();
  });

  await test.step('smoothing changes the drawn line, not the data', async () => {
    const csvBefore = await text(second, `/runs/${low.id}/steps.csv`);
    const slider = page.getByTestId('smoothing-slider');
    await slider.fill('0');
    await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-smoothing', '0');
    const raw = await chartCanvas(page, 'chart-reward').evaluate((c) => (c as HTMLCanvasElement).toDataURL());
    await slider.fill('0.9');
    await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-smoothing', '0.9');
    await expect.poll(() => chartCanvas(page, 'chart-reward').evaluate((c) => (c as HTMLCanvasElement).toDataURL())).not.toBe(raw);
    expect(await text(second, `/runs/${low.id}/steps.csv`)).toBe(csvBefore);
  });

  await test.step('the steps export equals the store', async () => {
    const csv = (await text(second, `/runs/${low.id}/steps.csv`)).trim().split('\n');
    const header = csv[0].split(',');
    const rows = csv.slice(1).map((line) => Object.fromEntries(line.split(',').map((v, i) => [header[i], v])));
    const jsonl = (await text(second, `/runs/${low.id}/steps.jsonl`)).trim().split('\n').map((l) => JSON.parse(l) as RunStep);
    const db = openStoreReadOnly(dataPaths(dataDir).store);
    try {
      const stored = listTrainSteps(db, MODEL, { limit: 1000 })
        .filter((s) => s.runId === low.id)
        .map((s) => ({ step: s.step, policy_version: s.policyVersion, reward: s.metrics.rewardMean as number, loss: (s.metrics.metrics as { loss: number }).loss }));
      expect(stored).toHaveLength(3);
      expect(rows.map((r) => [Number(r.model_step), Number(r.policy_version), Number(r.reward_mean), Number(r.loss)])).toEqual(stored.map((s) => [s.step, s.policy_version, s.reward, s.loss]));
      expect(rows.map((r) => Number(r.step))).toEqual([1, 2, 3]);
      expect(jsonl.map((s) => [s.step, s.policyVersion, s.rewardMean, s.metrics.loss])).toEqual(stored.map((s) => [s.step, s.policy_version, s.reward, s.loss]));
    } finally {
      db.close();
    }
  });

  await test.step('after a restart (no model at all) both runs are still there to browse', async () => {
    const third = await restart([]);
    await openRuns(page, third);
    await expect(page.getByTestId('run-row')).toHaveCount(2);
    await page.locator(`[data-testid="run-row"][data-run-id="${high.id}"]`).getByTestId('run-link').click();
    await expect(page.getByTestId('run-name')).toContainText('lr-high');
    await expect(page.getByTestId('run-config').locator('[data-key="train.learningRate"]')).toContainText(/0\.001|1e-3/);
    await expect(page.getByTestId('run-charts').getByTestId('chart-reward')).toBeVisible();
  });
});
