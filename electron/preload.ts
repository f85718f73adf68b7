/**
 * The only bridge between the web page and Electron: what a browser cannot do. Runs sandboxed (context
 * isolation on, no Node), so it is compiled to one CommonJS file at start-up (electron/preload-build.ts).
 * One IPC channel, main → page only (channels.ts): nothing here sends to the main process.
 */
import { contextBridge, ipcRenderer, webUtils, type IpcRendererEvent } from 'electron';

/** channels.ts's SCRIPT_CHOSEN_CHANNEL (this file cannot import it). */
const SCRIPT_CHOSEN_CHANNEL = 'agentjet:script-chosen';

const desktopBridge = {
  /** The OS the app runs on (`linux`, `darwin`, `win32`), for keyboard hints and path display. */
  platform: process.platform,
  /** The file system path of a file dropped on the window (browsers hide it; Electron 32+ removed `File.path`). */
  getPathForFile(file: File): string {
    return webUtils.getPathForFile(file);
  },
  /** Scripts chosen from the native menu or the tray (their paths); returns the unsubscribe function. */
  onScriptChosen(listener: (path: string) => void): () => void {
    const forward = (_event: IpcRendererEvent, path: unknown) => {
      if (typeof path === 'string') listener(path);
    };
    ipcRenderer.on(SCRIPT_CHOSEN_CHANNEL, forward);
    return () => ipcRenderer.off(SCRIPT_CHOSEN_CHANNEL, forward);
  },
};

export type DesktopBridge = typeof desktopBridge;

contextBridge.exposeInMainWorld('agentjet', desktopBridge);
