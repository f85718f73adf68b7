/** `npm start` without an Electron binary: one line saying why, then the headless peer with a working UI link. */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { expect, test } from '@playwright/test';
import { findElectronBinary } from './support/electron-binary.ts';
import { REPO_ROOT } from './support/peer.ts';

test('npm start falls back to the headless peer and prints a UI link that works', async ({ page }) => {
  test.skip(findElectronBinary().path !== null, 'an Electron binary is installed: npm start opens the desktop app instead');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'agentjet-start-'));
  const child = spawn(process.execPath, ['bin/start.mjs', '--port', '0', '--data-dir', dataDir], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.stderr.resume(); // the peer's log: drained, not asserted
  try {
    const lines: string[] = [];
    const uiUrl = await new Promise<string>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`npm start exited early (code ${code}):\n${lines.join('\n')}`)));
      createInterface({ input: child.stdout }).on('line', (line) => {
        lines.push(line);
        const match = /UI:\s+(http\S+)/.exec(line);
        if (match) resolve(match[1]);
      });
    });
    const notices = lines.filter((line) => line.startsWith('Desktop shell unavailable'));
    expect(notices).toHaveLength(1);

    await page.goto(uiUrl);
    await expect(page.getByTestId('connection-state')).toHaveAttribute('data-phase', 'live');
  } finally {
    child.kill('SIGTERM');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  }
});
