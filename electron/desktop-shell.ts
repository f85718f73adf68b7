/**
 * The desktop behaviours around the window, wired to Electron: the native menu (app-menu.ts), the tray with the
 * swarm's state and quick actions (tray.ts), notifications for ended training runs and opened circuit breakers
 * (run-notices.ts over peer-events.ts). The decisions live in those pure modules; this file only calls Electron.
 * Type-checked here; it runs where an Electron binary exists.
 */
import { clipboard, dialog, Menu, nativeImage, Notification, shell, Tray, type BrowserWindow } from 'electron';
import path from 'node:path';
import type { SwarmMembership } from '../swarm/common/api.ts';
import type { ViewId } from './common/views.ts';
import { SCRIPT_EXTENSIONS } from '../swarm/common/script-extensions.ts';
import { appMenuTemplate } from './app-menu.ts';
import { SCRIPT_CHOSEN_CHANNEL } from './channels.ts';
import { watchPeerEvents } from './peer-events.ts';
import type { DesktopNotice } from './run-notices.ts';
import { trayIconBitmap, trayMenuTemplate, trayState, type TrayState } from './tray.ts';

/** Tray icons are 16 logical pixels; drawn at 2x for high-density screens. */
const TRAY_ICON_PX = 32;

export interface DesktopShellOptions {
  /** The main window, or null while it is closed. */
  window(): BrowserWindow | null;
  peer: { apiUrl: string; token: string; dataDir: string };
  appRoot: string;
  quit(): void;
}

export interface DesktopShell {
  close(): void;
}

export function installDesktopShell(options: DesktopShellOptions): DesktopShell {
  const { peer } = options;

  const showWindow = (): BrowserWindow | null => {
    const window = options.window();
    if (!window) return null;
    if (window.isMinimized()) window.restore();
    window.show();
    window.focus();
    return window;
  };
  const showView = (view: ViewId) => {
    // The page follows its URL fragment (renderer/src/main.tsx): the same path a bookmark takes.
    void showWindow()?.webContents.executeJavaScript(`window.location.hash = ${JSON.stringify(`#/${view}`)}`);
  };
  const attachScript = async () => {
    const window = showWindow();
    if (!window) return;
    const chosen = await dialog.showOpenDialog(window, {
      title: 'Attach an agent script',
      properties: ['openFile'],
      filters: [{ name: 'Agent scripts', extensions: SCRIPT_EXTENSIONS.map((ext) => ext.slice(1)) }],
    });
    const file = chosen.filePaths[0];
    if (!chosen.canceled && file) window.webContents.send(SCRIPT_CHOSEN_CHANNEL, file);
  };
  const openFolder = (folder: string) => void shell.openPath(folder);
  const notify = (notice: DesktopNotice) => {
    if (!Notification.isSupported()) return;
    const shown = new Notification({ title: notice.title, body: notice.body });
    shown.on('click', () => showView(notice.view));
    shown.show();
  };
  const copyJoinToken = async () => {
    const response = await fetch(`${peer.apiUrl}/swarm`, { headers: { authorization: `Bearer ${peer.token}` } });
    const membership = (await response.json()) as SwarmMembership;
    if (!membership.token) return;
    clipboard.writeText(membership.token);
    notify({ title: `Join token of ${membership.swarm ?? 'the swarm'} copied`, body: 'Paste it into Join on the other machines. Share it like a password.', view: 'swarm' });
  };

  Menu.setApplicationMenu(
    Menu.buildFromTemplate(
      appMenuTemplate(
        {
          attachScript: () => void attachScript(),
          openDataFolder: () => openFolder(peer.dataDir),
          openLogFolder: () => openFolder(path.join(peer.dataDir, 'logs')),
          showView,
          openDocs: () => void shell.openPath(path.join(options.appRoot, 'README.md')),
        },
        process.platform,
      ),
    ),
  );

  const tray = new Tray(trayIcon(trayState(null)));
  let shown: TrayState | null = null;
  const showTrayState = (state: TrayState) => {
    // Status arrives every second; the menu is rebuilt only when what it says changed.
    if (shown && shown.level === state.level && shown.headline === state.headline && shown.detail === state.detail) return;
    if (shown?.level !== state.level) tray.setImage(trayIcon(state));
    shown = state;
    tray.setToolTip([state.headline, state.detail].filter(Boolean).join('\n'));
    tray.setContextMenu(
      Menu.buildFromTemplate(
        trayMenuTemplate(state, {
          showWindow: () => void showWindow(),
          showSwarm: () => showView('swarm'),
          copyJoinToken: () => void copyJoinToken().catch(() => undefined),
          attachScript: () => void attachScript(),
          openDataFolder: () => openFolder(peer.dataDir),
          quit: options.quit,
        }),
      ),
    );
  };
  showTrayState(trayState(null));
  tray.on('click', () => void showWindow());

  const events = watchPeerEvents({
    apiUrl: peer.apiUrl,
    token: peer.token,
    onStatus: (status) => showTrayState(trayState(status)),
    onNotice: notify,
    onWarning: (message) => console.warn(`[shell] ${message}`),
  });

  return {
    close() {
      events.close();
      tray.destroy();
    },
  };
}

function trayIcon(state: TrayState) {
  const image = nativeImage.createFromBitmap(trayIconBitmap(state.level, TRAY_ICON_PX), {
    width: TRAY_ICON_PX,
    height: TRAY_ICON_PX,
    scaleFactor: 2,
  });
  return image;
}
