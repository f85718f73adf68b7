/**
 * The main window's bounds and maximised state, remembered across restarts in the app-data folder
 * (`<userData>/window-state.json`). On restore the bounds are fitted to the displays attached now: a window saved
 * on a monitor that is gone, or larger than the screen, comes back whole on a visible one.
 * No Electron import: the shell passes in the displays' work areas, so this is tested under vitest.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

export interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface WindowState {
  /** Absent until the window was placed once: the system centres it. */
  x?: number;
  y?: number;
  width: number;
  height: number;
  maximized: boolean;
}

/** The first start's size; the minimum is what the UI's layout needs. */
export const DEFAULT_WINDOW_STATE: WindowState = { width: 1360, height: 880, maximized: false };
export const MIN_WINDOW_SIZE = { width: 880, height: 560 };
/** At least this much of the title bar must be on a display to count as visible (enough to grab it). */
const MIN_VISIBLE_PX = 100;

const savedStateSchema = z.object({
  x: z.number().int().optional(),
  y: z.number().int().optional(),
  width: z.number().int().positive(),
  height: z.number().int().positive(),
  maximized: z.boolean(),
});

export function windowStateFile(userDataDir: string): string {
  return path.join(userDataDir, 'window-state.json');
}

/**
 * The state to open the window with: the saved one fitted to `displays` (work areas, primary first), or the
 * default when nothing valid was saved.
 */
export function restoreWindowState(saved: unknown, displays: readonly Rect[]): WindowState {
  const parsed = savedStateSchema.safeParse(saved);
  if (!parsed.success) return { ...DEFAULT_WINDOW_STATE };
  return fitToDisplays(parsed.data, displays);
}

export function fitToDisplays(state: WindowState, displays: readonly Rect[]): WindowState {
  const primary = displays[0];
  if (!primary) return state;
  const placed = state.x !== undefined && state.y !== undefined;
  const home = placed ? (displays.find((d) => titleBarVisible({ ...state, x: state.x!, y: state.y! }, d)) ?? null) : null;
  const area = home ?? primary;
  const width = clamp(state.width, Math.min(MIN_WINDOW_SIZE.width, area.width), area.width);
  const height = clamp(state.height, Math.min(MIN_WINDOW_SIZE.height, area.height), area.height);
  if (!home) {
    // Off every display now (or never placed): centred on the primary one.
    return {
      x: Math.round(area.x + (area.width - width) / 2),
      y: Math.round(area.y + (area.height - height) / 2),
      width,
      height,
      maximized: state.maximized,
    };
  }
  return {
    x: clamp(state.x!, area.x, area.x + area.width - width),
    y: clamp(state.y!, area.y, area.y + area.height - height),
    width,
    height,
    maximized: state.maximized,
  };
}

/** The top strip of the window (where it is dragged from) overlaps the display by MIN_VISIBLE_PX each way. */
function titleBarVisible(window: Rect, display: Rect): boolean {
  const overlapX = Math.min(window.x + window.width, display.x + display.width) - Math.max(window.x, display.x);
  const titleY = window.y;
  return overlapX >= Math.min(MIN_VISIBLE_PX, window.width) && titleY >= display.y && titleY < display.y + display.height - MIN_VISIBLE_PX / 4;
}

function clamp(value: number, min: number, max: number): number {
  return Math.max(min, Math.min(max, value));
}

/** The saved state, or undefined when none (or unreadable: the window then opens with the default). */
export function readSavedWindowState(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Written atomically (a crash mid-write keeps the last good file). */
export function saveWindowState(file: string, state: WindowState): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(state) + '\n');
  renameSync(tmp, file);
}

/**
 * What to save for a window: its normal (restored) bounds even while maximised, so un-maximising after a restart
 * returns to the size the user chose.
 */
export function windowStateOf(window: { normalBounds: Rect; maximized: boolean }): WindowState {
  const { x, y, width, height } = window.normalBounds;
  return { x: Math.round(x), y: Math.round(y), width: Math.round(width), height: Math.round(height), maximized: window.maximized };
}
