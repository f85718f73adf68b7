#!/usr/bin/env node
// `npm start`: the desktop app when an Electron binary is installed; otherwise the headless peer, whose UI
// opens in any browser. Extra arguments go to the peer (`npm start -- --port 7420 --data-dir ./lab`).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const APP_ROOT = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);
/** Fetching Electron (~100 MB) either starts within seconds or is blocked; don't keep the user waiting longer. */
const ELECTRON_INSTALL_TIMEOUT_MS = 30_000;

const peerArgs = process.argv.slice(2);

buildUiIfMissing();

let electron = findElectron();
if (!electron.path && process.env.AGENTJET_HEADLESS !== '1') {
  const installError = tryInstallElectron();
  electron = findElectron();
  if (!electron.path && installError) electron.why = `the Electron binary is not installed and downloading it failed: ${installError}`;
}

if (electron.path && process.env.AGENTJET_HEADLESS !== '1') {
  // The peer runs under this Node (AGENTJET_NODE_PATH): native modules in node_modules were built for it.
  run(electron.path, [path.join(APP_ROOT, 'electron', 'main.mjs'), ...peerArgs], { AGENTJET_NODE_PATH: process.execPath });
} else {
  const why = process.env.AGENTJET_HEADLESS === '1' ? 'AGENTJET_HEADLESS=1 is set' : electron.why;
  console.log(`Desktop shell unavailable (${why}); running the headless peer — open the UI link it prints below in a browser.`);
  run(process.execPath, [path.join(APP_ROOT, 'bin', 'agentjet.mjs'), 'node', ...peerArgs], {});
}

/** The Electron executable if its binary is installed, or why not. */
function findElectron() {
  try {
    delete require.cache[require.resolve('electron')];
    const executable = require('electron');
    if (typeof executable === 'string' && existsSync(executable)) return { path: executable, why: '' };
    return { path: null, why: `the Electron binary is missing at ${executable}` };
  } catch (error) {
    // The package's own message ("delete node_modules/electron…") misleads: only the binary's download is missing.
    return { path: null, why: `the Electron binary is not installed (${error instanceof Error ? error.name : 'unknown error'})` };
  }
}

/** One attempt to download the binary with the electron package's own installer; returns why it failed, if it did. */
function tryInstallElectron() {
  const installer = path.join(APP_ROOT, 'node_modules', 'electron', 'install.js');
  if (!existsSync(installer)) return 'the electron package is not installed';
  const result = spawnSync(process.execPath, [installer], { cwd: APP_ROOT, encoding: 'utf8', timeout: ELECTRON_INSTALL_TIMEOUT_MS });
  if (result.error) return result.error.message;
  if (result.status === 0) return null;
  const firstError = `${result.stderr}\n${result.stdout}`.split('\n').find((line) => /error/i.test(line) && !/^\s+at /.test(line));
  return firstError?.trim() ?? `its installer exited with code ${result.status}`;
}

/** The peer serves renderer/dist: build it once when a fresh checkout has none. */
function buildUiIfMissing() {
  if (existsSync(path.join(APP_ROOT, 'renderer', 'dist', 'index.html'))) return;
  console.log('Building the UI (renderer/dist is missing)…');
  const vite = require.resolve('vite/bin/vite.js');
  const result = spawnSync(process.execPath, [vite, 'build', '--config', path.join(APP_ROOT, 'renderer', 'vite.config.ts'), '--logLevel', 'warn'], {
    cwd: APP_ROOT,
    stdio: 'inherit',
  });
  if (result.status !== 0) {
    console.error('Building the UI failed; the peer will start, but its UI address will not serve a page.');
  }
}

/** Run a child in the foreground: its output is ours, Ctrl-C and SIGTERM reach it, its exit code is ours. */
function run(command, args, extraEnv) {
  const child = spawn(command, args, { cwd: APP_ROOT, stdio: 'inherit', env: { ...process.env, ...extraEnv } });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => {
    process.exitCode = code ?? (signal ? 1 : 0);
  });
}
