/**
 * Turns a dropped or chosen file into what POST /api/clients takes: in Electron the file's path on disk (the
 * preload's getPathForFile), in a browser its content, uploaded.
 */
import { SCRIPT_EXTENSIONS } from '../../../../swarm/common/script-extensions.ts';
import { desktopBridge } from '../../desktop.ts';
import type { DroppedScript } from '../../store/clients/slice.ts';

export class UnsupportedScriptError extends Error {
  override readonly name = 'UnsupportedScriptError';
}

export async function readDroppedScript(file: File): Promise<DroppedScript> {
  if (!SCRIPT_EXTENSIONS.some((ext) => file.name.toLowerCase().endsWith(ext))) {
    throw new UnsupportedScriptError(`${file.name} is not an agent script (${SCRIPT_EXTENSIONS.join(', ')})`);
  }
  const path = desktopBridge()?.getPathForFile(file);
  if (path) return { filename: file.name, path };
  return { filename: file.name, content: await file.text() };
}

/** A script chosen by path in the desktop shell (File › Attach Script…): attached from where it lies. */
export function scriptAtPath(path: string): DroppedScript {
  return { filename: path.split(/[\\/]/).pop() || path, path };
}
