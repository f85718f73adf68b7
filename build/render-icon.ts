/**
 * Renders build/icon.svg to build/icon.png (1024², electron-builder derives the macOS .icns and Windows .ico
 * from it) with the Chromium the e2e tests use. Run: `node --import tsx build/render-icon.ts`.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium } from '@playwright/test';

const SIZE = 1024;
const svgPath = fileURLToPath(new URL('./icon.svg', import.meta.url));
const pngPath = fileURLToPath(new URL('./icon.png', import.meta.url));

const browser = await chromium.launch({
  executablePath: process.env.AGENTJET_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
try {
  const page = await browser.newPage({ viewport: { width: SIZE, height: SIZE } });
  const svg = readFileSync(svgPath, 'utf8').replace('<svg ', `<svg width="${SIZE}" height="${SIZE}" `);
  await page.setContent(`<html><body style="margin:0;background:transparent">${svg}</body></html>`);
  await page.locator('svg').screenshot({ path: pngPath, omitBackground: true });
  console.log(`wrote ${pngPath}`);
} finally {
  await browser.close();
}
