/**
 * How the tests and the UI benchmark launch Debian's Chromium (Playwright's own browsers are not downloaded on
 * this project's machines). Without the background-networking flags Chromium keeps dialling Google services,
 * which a closed network refuses.
 */
export const CHROMIUM_PATH = process.env.AGENTJET_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
