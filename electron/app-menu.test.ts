import type { MenuItemConstructorOptions } from 'electron';
import { describe, expect, it } from 'vitest';
import { appMenuTemplate, type AppMenuActions } from './app-menu.ts';

function recordingActions() {
  const calls: string[] = [];
  const actions: AppMenuActions = {
    attachScript: () => calls.push('attach'),
    openDataFolder: () => calls.push('data'),
    openLogFolder: () => calls.push('logs'),
    showView: (view) => calls.push(`view:${view}`),
    openDocs: () => calls.push('docs'),
  };
  return { actions, calls };
}

function submenu(template: MenuItemConstructorOptions[], label: string): MenuItemConstructorOptions[] {
  const menu = template.find((item) => item.label === label || item.role === label);
  if (!menu || !Array.isArray(menu.submenu)) throw new Error(`no ${label} menu`);
  return menu.submenu;
}

function click(item: MenuItemConstructorOptions | undefined) {
  (item?.click as (() => void) | undefined)?.();
}

describe('application menu', () => {
  it('has File, Edit, View and Help; the app and window menus only on macOS', () => {
    const linux = appMenuTemplate(recordingActions().actions, 'linux');
    expect(linux.map((item) => item.label ?? item.role)).toEqual(['File', 'editMenu', 'View', 'help']);
    const mac = appMenuTemplate(recordingActions().actions, 'darwin');
    expect(mac.map((item) => item.label ?? item.role)).toEqual(['appMenu', 'File', 'editMenu', 'View', 'windowMenu', 'help']);
    expect(submenu(linux, 'File').some((item) => item.role === 'quit')).toBe(true);
    expect(submenu(mac, 'File').some((item) => item.role === 'quit')).toBe(false);
  });

  it('File attaches a script (Ctrl/Cmd+O) and opens the data folder', () => {
    const { actions, calls } = recordingActions();
    const file = submenu(appMenuTemplate(actions, 'linux'), 'File');
    const attach = file.find((item) => item.label === 'Attach Script…');
    expect(attach?.accelerator).toBe('CmdOrCtrl+O');
    click(attach);
    click(file.find((item) => item.label === 'Open Data Folder'));
    expect(calls).toEqual(['attach', 'data']);
  });

  it('View switches to each of the seven views with Ctrl/Cmd+1…7, in sidebar order', () => {
    const { actions, calls } = recordingActions();
    const views = submenu(appMenuTemplate(actions, 'linux'), 'View').filter((item) => item.accelerator?.match(/\+\d$/));
    expect(views.map((item) => [item.label, item.accelerator])).toEqual([
      ['Swarm', 'CmdOrCtrl+1'],
      ['Models', 'CmdOrCtrl+2'],
      ['Runs', 'CmdOrCtrl+3'],
      ['Research', 'CmdOrCtrl+4'],
      ['Clients', 'CmdOrCtrl+5'],
      ['Episodes', 'CmdOrCtrl+6'],
      ['Timeline', 'CmdOrCtrl+7'],
    ]);
    for (const item of views) click(item);
    expect(calls).toEqual(['view:swarm', 'view:models', 'view:runs', 'view:research', 'view:clients', 'view:episodes', 'view:timeline']);
  });

  it('Help opens the documentation and the peer logs', () => {
    const { actions, calls } = recordingActions();
    for (const item of submenu(appMenuTemplate(actions, 'win32'), 'help')) click(item);
    expect(calls).toEqual(['docs', 'logs']);
  });
});
