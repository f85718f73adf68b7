import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DebugLogger } from 'builder-util';
import { validateConfiguration } from 'app-builder-lib/out/util/config/config.js';
import type { Configuration } from 'app-builder-lib';

const repoFile = (relative: string) => fileURLToPath(new URL(`../${relative}`, import.meta.url));
const config = parse(readFileSync(repoFile('build/electron-builder.yml'), 'utf8')) as Configuration;

describe('build/electron-builder.yml', () => {
  it("passes electron-builder's own schema validation", async () => {
    await expect(validateConfiguration(config, new DebugLogger(false))).resolves.toBeUndefined();
  });

  it('declares the installers of every platform', () => {
    expect(config.linux?.target).toEqual(['AppImage', 'deb']);
    expect(config.mac?.target).toBe('dmg');
    expect(config.win?.target).toBe('nsis');
  });

  it('points at files that exist: the main entry and the icon', () => {
    const main = (config.extraMetadata as { main: string }).main;
    expect(existsSync(repoFile(main))).toBe(true);
    expect(existsSync(repoFile(config.icon as string))).toBe(true);
    expect(config.files).toContain('renderer/dist/**');
  });
});
