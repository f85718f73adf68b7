import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_WINDOW_STATE,
  readSavedWindowState,
  restoreWindowState,
  saveWindowState,
  windowStateFile,
  windowStateOf,
} from './window-state.ts';

const LAPTOP = { x: 0, y: 0, width: 1440, height: 870 };
const MONITOR_RIGHT = { x: 1440, y: -200, width: 2560, height: 1400 };

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('window state across restarts', () => {
  it('saves the normal bounds and maximised flag, and reads them back on the same displays', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'agentjet-window-'));
    dirs.push(dir);
    const file = windowStateFile(dir);
    saveWindowState(file, windowStateOf({ normalBounds: { x: 1600.4, y: 0, width: 1200, height: 900 }, maximized: true }));
    expect(restoreWindowState(readSavedWindowState(file), [LAPTOP, MONITOR_RIGHT])).toEqual({
      x: 1600,
      y: 0,
      width: 1200,
      height: 900,
      maximized: true,
    });
  });

  it('opens with the default size, centred, when nothing valid was saved', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'agentjet-window-'));
    dirs.push(dir);
    const file = windowStateFile(dir);
    expect(readSavedWindowState(file)).toBeUndefined();
    writeFileSync(file, '{"width": "wide"');
    const state = restoreWindowState(readSavedWindowState(file), [MONITOR_RIGHT]);
    expect(state).toMatchObject({ width: DEFAULT_WINDOW_STATE.width, height: DEFAULT_WINDOW_STATE.height, maximized: false });
    expect(restoreWindowState({ width: -3, height: 10, maximized: false }, [])).toEqual(DEFAULT_WINDOW_STATE);
  });

  it('brings a window saved on a monitor that is gone back onto the primary display, whole', () => {
    const state = restoreWindowState({ x: 2000, y: 100, width: 1800, height: 1200, maximized: false }, [LAPTOP]);
    expect(state).toEqual({ x: 0, y: 0, width: 1440, height: 870, maximized: false });
    const small = restoreWindowState({ x: 5000, y: 5000, width: 1000, height: 700, maximized: false }, [LAPTOP]);
    expect(small).toEqual({ x: 220, y: 85, width: 1000, height: 700, maximized: false });
  });

  it('pulls a window hanging over a display edge back inside, and never below the minimum size', () => {
    const state = restoreWindowState({ x: 1000, y: 600, width: 1000, height: 700, maximized: false }, [LAPTOP]);
    expect(state).toEqual({ x: 440, y: 170, width: 1000, height: 700, maximized: false });
    const tiny = restoreWindowState({ x: 10, y: 10, width: 200, height: 100, maximized: false }, [LAPTOP]);
    expect(tiny).toMatchObject({ width: 880, height: 560 });
  });
});
