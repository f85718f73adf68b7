/** Where the Electron binary is, or why there is none (the `electron` package's index throws without it). */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

export function findElectronBinary(): { path: string; why?: undefined } | { path: null; why: string } {
  const require = createRequire(import.meta.url);
  try {
    const executable: unknown = require('electron');
    if (typeof executable === 'string' && existsSync(executable)) return { path: executable };
    return { path: null, why: `the Electron binary is missing at ${String(executable)}` };
  } catch (error: unknown) {
    // The package's own message ("delete node_modules/electron…") misleads: only the binary's download is missing.
    return {
      path: null,
      why: `no Electron binary in node_modules/electron (${errorName(error)}: its download was skipped or blocked; \`node node_modules/electron/install.js\` fetches it)`,
    };
  }
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : 'unknown error';
}
