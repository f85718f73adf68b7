// End-to-end tests: Chromium against a real headless peer (e2e/support/peer.ts), and the Electron shell when an
// Electron binary exists. `npm run test:e2e` builds the UI first (the peer serves renderer/dist).
import { existsSync } from 'node:fs';
import { defineConfig } from '@playwright/test';

/** Debian's Chromium where Playwright's own browsers are not downloaded (this project's build machines). */
const systemChromium = process.env.AGENTJET_CHROMIUM ?? '/usr/bin/chromium';

// Without the background-networking flags Chromium keeps dialling Google services, which a closed network refuses.
const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

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
        launchOptions: existsSync(systemChromium) ? { executablePath: systemChromium, args: chromiumArgs } : { args: chromiumArgs },
      },
    },
    { name: 'electron', testMatch: /electron\.spec\.ts/ },
  ],
});
