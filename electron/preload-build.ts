/**
 * Sandboxed preloads are loaded by Electron itself as one CommonJS script: tsx cannot hook them. So the shell
 * compiles preload.ts with esbuild (already installed with tsx) into the app's data folder at each start (ms).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { transformSync } from 'esbuild';

export function buildPreload(sourcePath: string, outDir: string): string {
  const source = readFileSync(sourcePath, 'utf8');
  const { code } = transformSync(source, { loader: 'ts', format: 'cjs', target: 'es2022', sourcefile: sourcePath });
  mkdirSync(outDir, { recursive: true });
  const outPath = path.join(outDir, 'preload.cjs');
  writeFileSync(outPath, code);
  return outPath;
}
