/**
 * The native application menu, as a template (Electron builds it with Menu.buildFromTemplate). Pure: the actions
 * are passed in, so the structure, labels and accelerators are tested under vitest without Electron.
 *   File   Attach script…  (⌘/Ctrl+O), Open data folder, Quit (not on macOS, where the app menu has it)
 *   Edit   the standard roles (copy and paste in the token field need them on macOS)
 *   View   the seven views (⌘/Ctrl+1…7), reload, zoom, full screen, developer tools
 *   Help   Documentation, Report a problem (the peer's log folder)
 */
import type { MenuItemConstructorOptions } from 'electron';
import { VIEWS, type ViewId } from './common/views.ts';

export interface AppMenuActions {
  attachScript(): void;
  openDataFolder(): void;
  openLogFolder(): void;
  showView(view: ViewId): void;
  openDocs(): void;
}

export function appMenuTemplate(actions: AppMenuActions, platform: NodeJS.Platform): MenuItemConstructorOptions[] {
  const mac = platform === 'darwin';
  const file: MenuItemConstructorOptions = {
    label: 'File',
    submenu: [
      { label: 'Attach Script…', accelerator: 'CmdOrCtrl+O', click: () => actions.attachScript() },
      { type: 'separator' },
      { label: 'Open Data Folder', click: () => actions.openDataFolder() },
      ...(mac ? [] : [{ type: 'separator' } as const, { role: 'quit' } as const]),
    ],
  };
  const view: MenuItemConstructorOptions = {
    label: 'View',
    submenu: [
      ...VIEWS.map((entry, index): MenuItemConstructorOptions => ({
        label: entry.label,
        accelerator: `CmdOrCtrl+${index + 1}`,
        click: () => actions.showView(entry.id),
      })),
      { type: 'separator' },
      { role: 'reload' },
      { role: 'toggleDevTools' },
      { type: 'separator' },
      { role: 'resetZoom' },
      { role: 'zoomIn' },
      { role: 'zoomOut' },
      { type: 'separator' },
      { role: 'togglefullscreen' },
    ],
  };
  const help: MenuItemConstructorOptions = {
    role: 'help',
    submenu: [
      { label: 'AgentJet Documentation', click: () => actions.openDocs() },
      { label: 'Open Peer Logs', click: () => actions.openLogFolder() },
    ],
  };
  return [
    ...(mac ? [{ role: 'appMenu' } as const] : []),
    file,
    { role: 'editMenu' },
    view,
    ...(mac ? [{ role: 'windowMenu' } as const] : []),
    help,
  ];
}
