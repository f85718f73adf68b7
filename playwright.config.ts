// End-to-end tests: Chromium against a real headless peer (e2e/support/peer.ts), and the Electron shell when an
// Electron binary exists. `npm run test:e2e` builds the UI first (the peer serves renderer/dist).
import { existsSync } from 'node:fs';
import { defineConfig } from '@playwright/test';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from './e2e/support/chromium.ts';


export default defineConfig({
  testDir: 'e2e',
  outputDir: 'test-results',
  // One worker: each test drives a real peer process and a browser, and build machines have two cores.
  workers: 1,
  fullyParallel: false,
  forbidOnly: Boolean(process.env.CI),
  timeout: 60_000,
  expect: { timeout: 10_000 },
  reporter: [['list'], ['html', { open: 'never', outputFolder: 'playwright-report' }]],
  use: {
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
    viewport: { width: 1360, height: 900 },
  },
  projects: [
    {
      name: 'chromium',
      testIgnore: /electron\.spec\.ts/,
      use: {
        browserName: 'chromium',
        launchOptions: existsSync(CHROMIUM_PATH) ? { executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS } : { args: CHROMIUM_ARGS },
      },
    },
    { name: 'electron', testMatch: /electron\.spec\.ts/ },
  ],
});
