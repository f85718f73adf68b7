/**
 * What the Electron preload (electron/preload.ts) adds to `window` — absent in a plain browser. Declared here
 * again because the renderer may not import from electron/; keep the two in step.
 */
export interface DesktopBridge {
  platform: string;
  getPathForFile(file: File): string;
  /** Scripts chosen from the native menu or the tray, by path; returns the unsubscribe function. */
  onScriptChosen(listener: (path: string) => void): () => void;
}

/** The desktop bridge when running inside the Electron shell, null in a browser. */
export function desktopBridge(): DesktopBridge | null {
  return (window as Window & { agentjet?: DesktopBridge }).agentjet ?? null;
}
