import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { SCRIPT_CHOSEN_CHANNEL } from './channels.ts';
import { buildPreload } from './preload-build.ts';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));

describe('buildPreload', () => {
  it('compiles preload.ts into one CommonJS script that a sandboxed preload can run', () => {
    const outDir = mkdtempSync(path.join(tmpdir(), 'agentjet-preload-'));
    dirs.push(outDir);
    const out = buildPreload(fileURLToPath(new URL('./preload.ts', import.meta.url)), outDir);
    const code = readFileSync(out, 'utf8');
    expect(path.basename(out)).toBe('preload.cjs');
    expect(code).toContain('require("electron")');
    expect(code).toContain('exposeInMainWorld("agentjet"');
    expect(code).not.toMatch(/^\s*import\s/m);
    // Only the electron module is required: the sandbox offers no other.
    expect(code.match(/require\("([^"]+)"\)/g)).toEqual(['require("electron")']);
    // The channel it listens on is the one the main process sends on.
    expect(code).toContain(`"${SCRIPT_CHOSEN_CHANNEL}"`);
  });
});
