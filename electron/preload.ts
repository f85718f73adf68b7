/**
 * The only bridge between the web page and Electron: what a browser cannot do. Runs sandboxed (context
 * isolation on, no Node), so it is compiled to one CommonJS file at start-up (electron/preload-build.ts).
 * There are no IPC channels: nothing here sends to the main process.
 */
import { contextBridge, webUtils } from 'electron';

const desktopBridge = {
  /** The OS the app runs on (`linux`, `darwin`, `win32`), for keyboard hints and path display. */
  platform: process.platform,
  /** The file system path of a file dropped on the window (browsers hide it; Electron 32+ removed `File.path`). */
  getPathForFile(file: File): string {
    return webUtils.getPathForFile(file);
  },
};

export type DesktopBridge = typeof desktopBridge;

contextBridge.exposeInMainWorld('agentjet', desktopBridge);
