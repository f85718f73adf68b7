/**
 * The Electron main process: one window showing the peer runtime's UI, its bounds remembered (window-state.ts),
 * with a native menu, a tray and notifications (desktop-shell.ts).
 *
 * The peer runtime runs as a child process — the same `agentjet node --json` a headless machine runs — and the
 * window loads the UI URL it prints. A child process (not utilityProcess) because: it is exactly the headless
 * code path (one contract, the ready line, tested by the e2e suite); the UI talks to it over HTTP anyway, so
 * utilityProcess's MessagePorts would go unused; and in development it can run under the system Node
 * (AGENTJET_NODE_PATH, set by `npm start`) so native modules built for that Node (better-sqlite3) load.
 * Packaged, it runs on Electron's own Node (ELECTRON_RUN_AS_NODE=1; electron-builder rebuilds native modules).
 */
import '../p2p/polyfill.ts';
import { app, BrowserWindow, dialog, nativeTheme, screen, session, shell, type WebContents } from 'electron';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installDesktopShell, type DesktopShell } from './desktop-shell.ts';
import { buildPreload } from './preload-build.ts';
import { startPeerProcess, type PeerProcess } from './peer-process.ts';
import { contentSecurityPolicy, isExternalWebLink, isPermissionGranted, isTrustedUrl } from './security.ts';
import {
  MIN_WINDOW_SIZE,
  readSavedWindowState,
  restoreWindowState,
  saveWindowState,
  windowStateFile,
  windowStateOf,
} from './window-state.ts';

const APP_ROOT = fileURLToPath(new URL('..', import.meta.url));
const WINDOW_BACKGROUND = { light: '#f5f6f8', dark: '#0e1014' }; // the UI's --bg, so no white flash in dark mode

let peer: PeerProcess | null = null;
let mainWindow: BrowserWindow | null = null;
/** Menu, tray and notifications (desktop-shell.ts). */
let desktop: DesktopShell | null = null;
/** Set once quitting has begun, so the peer's exit is expected rather than reported as a crash. */
let quitting = false;

// A separate profile (tests, or two peers side by side) — must be set before anything reads userData.
if (process.env.AGENTJET_USER_DATA_DIR) app.setPath('userData', process.env.AGENTJET_USER_DATA_DIR);

// One app instance per user: a second launch focuses the first window instead of starting a second peer.
if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  app.on('second-instance', () => {
    if (!mainWindow) return;
    if (mainWindow.isMinimized()) mainWindow.restore();
    mainWindow.focus();
  });
  app.on('web-contents-created', (_event, contents) => guardWebContents(contents));
  app.on('window-all-closed', () => app.quit());
  app.on('before-quit', onBeforeQuit);
  app.whenReady().then(start, fail);
}

async function start(): Promise<void> {
  peer = await startPeerProcess({
    appRoot: APP_ROOT,
    execPath: process.env.AGENTJET_NODE_PATH ?? process.execPath,
    dataDir: process.env.AGENTJET_DATA_DIR ?? path.join(app.getPath('userData'), 'peer'),
    env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
    onStderrLine: (line) => console.error(`[peer] ${line}`),
  });
  const uiOrigin = new URL(peer.uiUrl).origin;
  peer.child.once('exit', (code, signal) => onPeerExit(code, signal));
  configureSession(uiOrigin);

  const preload = buildPreload(path.join(APP_ROOT, 'electron', 'preload.ts'), path.join(app.getPath('userData'), 'shell'));
  mainWindow = createWindow(preload, uiOrigin);
  const running = peer;
  desktop = installDesktopShell({
    window: () => mainWindow,
    peer: { apiUrl: running.apiUrl, token: running.token, dataDir: running.dataDir },
    appRoot: APP_ROOT,
    quit: () => app.quit(),
  });
  await mainWindow.loadURL(peer.uiUrl);
}

function createWindow(preload: string, uiOrigin: string): BrowserWindow {
  // Where the user left it, fitted to the displays attached now (primary first).
  const stateFile = windowStateFile(app.getPath('userData'));
  const primary = screen.getPrimaryDisplay();
  const displays = [primary, ...screen.getAllDisplays().filter((d) => d.id !== primary.id)].map((d) => d.workArea);
  const bounds = restoreWindowState(readSavedWindowState(stateFile), displays);
  const window = new BrowserWindow({
    x: bounds.x,
    y: bounds.y,
    width: bounds.width,
    height: bounds.height,
    minWidth: MIN_WINDOW_SIZE.width,
    minHeight: MIN_WINDOW_SIZE.height,
    title: 'AgentJet',
    show: false,
    backgroundColor: WINDOW_BACKGROUND[nativeTheme.shouldUseDarkColors ? 'dark' : 'light'],
    webPreferences: { preload, contextIsolation: true, nodeIntegration: false, sandbox: true, webSecurity: true, spellcheck: false },
  });
  window.once('ready-to-show', () => {
    if (bounds.maximized) window.maximize();
    window.show();
  });
  window.on('close', () => {
    try {
      saveWindowState(stateFile, windowStateOf({ normalBounds: window.getNormalBounds(), maximized: window.isMaximized() }));
    } catch (error) {
      console.warn(`[shell] the window's place was not saved: ${String(error)}`); // closing matters more
    }
  });
  window.on('closed', () => {
    mainWindow = null;
  });
  window.webContents.on('will-navigate', (event, url) => {
    if (!isTrustedUrl(url, uiOrigin)) event.preventDefault();
  });
  return window;
}

/** Only the peer's origin gets the clipboard; every response from it carries a strict CSP. */
function configureSession(uiOrigin: string): void {
  const { defaultSession } = session;
  defaultSession.setPermissionRequestHandler((contents, permission, callback) =>
    callback(isPermissionGranted(permission, contents.getURL(), uiOrigin)),
  );
  defaultSession.setPermissionCheckHandler((_contents, permission, requestingOrigin) => isPermissionGranted(permission, requestingOrigin, uiOrigin));
  defaultSession.webRequest.onHeadersReceived({ urls: [`${uiOrigin}/*`] }, (details, callback) => {
    callback({ responseHeaders: { ...details.responseHeaders, 'Content-Security-Policy': [contentSecurityPolicy(uiOrigin)] } });
  });
}

/** Every web contents: no new windows (web links open in the system browser), no webviews. */
function guardWebContents(contents: WebContents): void {
  contents.setWindowOpenHandler(({ url }) => {
    if (isExternalWebLink(url)) void shell.openExternal(url);
    return { action: 'deny' };
  });
  contents.on('will-attach-webview', (event) => event.preventDefault());
}

function onPeerExit(code: number | null, signal: NodeJS.Signals | null): void {
  if (quitting) return;
  const tail = peer?.stderr().split('\n').slice(-15).join('\n') ?? '';
  dialog.showErrorBox('The AgentJet peer stopped', `It exited with ${signal ?? `code ${code}`}.\n\n${tail}`);
  app.quit();
}

/** Stop the peer before the app exits: SQLite and the trainer workers close cleanly. */
function onBeforeQuit(event: Electron.Event): void {
  if (quitting || !peer) return;
  quitting = true;
  desktop?.close();
  event.preventDefault();
  void peer.stop().finally(() => app.quit());
}

function fail(error: unknown): void {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  dialog.showErrorBox('AgentJet could not start', message);
  quitting = true;
  void (peer?.stop() ?? Promise.resolve()).finally(() => app.exit(1));
}
