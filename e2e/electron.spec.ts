/**
 * The desktop shell: Electron starts the peer runtime, shows its UI, exposes only the small preload bridge, and
 * stops the peer on quit. Runs only where an Electron binary is installed (not on build machines without it).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { _electron as electron, expect, test } from '@playwright/test';
import { findElectronBinary } from './support/electron-binary.ts';
import { REPO_ROOT } from './support/peer.ts';

const binary = findElectronBinary();

test('the desktop shell starts the peer, shows the Swarm view and stops the peer on quit', async () => {
  if (!binary.path) console.log(`Electron spec skipped: ${binary.why}`);
  test.skip(!binary.path, binary.why ?? '');
  const profile = mkdtempSync(path.join(tmpdir(), 'agentjet-electron-'));
  try {
    const app = await electron.launch({
      executablePath: binary.path ?? undefined,
      args: [path.join(REPO_ROOT, 'electron', 'main.mjs')],
      cwd: REPO_ROOT,
      env: { ...process.env, AGENTJET_USER_DATA_DIR: profile, AGENTJET_NODE_PATH: process.execPath },
    });
    const window = await app.firstWindow();
    await expect(window.getByTestId('connection-state')).toHaveAttribute('data-phase', 'live', { timeout: 60_000 });
    await expect(window.getByRole('heading', { level: 1, name: 'Swarm' })).toBeVisible();

    // The page gets the preload bridge and nothing of Node.
    expect(await window.evaluate('Object.keys(window.agentjet).sort().join(",")')).toBe('getPathForFile,onScriptChosen,platform');
    expect(await window.evaluate('typeof require')).toBe('undefined');
    expect(await window.evaluate('typeof process')).toBe('undefined');

    const apiUrl = new URL('/api/status', window.url()).toString();
    await app.close();
    // The peer went down with the app: its port no longer answers.
    await expect(fetch(apiUrl)).rejects.toThrow();
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
});
