/**
 * TypeScript scripts run as the plain module transpiled once at attach, not through tsx each time, and as the
 * module kind their folder gives them: CommonJS (require, __dirname) where the folder's package.json says nothing,
 * ESM (import, top-level await) under `"type": "module"` and for `.mts`. Real child processes.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { launchCommand, probeAgentV8Flags, snapshotScript } from './script.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function folder(packageJson: object | null): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentjet-script-'));
  dirs.push(dir);
  if (packageJson) writeFileSync(join(dir, 'package.json'), JSON.stringify(packageJson));
  return dir;
}

/** Attaches the script and runs it once, as the runner would unsandboxed: its launch command and what it printed. */
function attachAndRun(dir: string, filename: string, code: string): { args: string[]; stdout: string; status: number | null } {
  const path = join(dir, filename);
  writeFileSync(path, code);
  const scripts = join(dir, 'snapshots');
  mkdirSync(scripts);
  const script = snapshotScript(scripts, 'agent', { path }, 'auto');
  const launch = launchCommand(script, { workDir: dir, sandbox: false, dataDir: join(dir, 'data') });
  const run = spawnSync(launch.command, launch.args, { cwd: dir, encoding: 'utf8' });
  return { args: launch.args, stdout: run.stdout, status: run.status };
}

describe('a TypeScript agent script', () => {
  it('runs as CommonJS in a folder without "type": "module", from its transpiled copy', () => {
    const ran = attachAndRun(folder({ name: 'lab-agents' }), 'agent.ts', `const os: typeof import('node:os') = require('node:os');\nconst here: string = __dirname;\nconsole.log(typeof os.cpus, here.length > 0);\n`);
    expect(ran.status).toBe(0);
    expect(ran.stdout.trim()).toBe('function true');
    expect(ran.args.at(-1)).toMatch(/agent\.ts\.cjs$/);
    expect(ran.args.join(' ')).not.toContain('tsx');
  });

  it('runs as ESM under "type": "module", and as .mts anywhere', () => {
    const code = `import { cpus } from 'node:os';\nconst n: number = await Promise.resolve(cpus().length);\nconsole.log(n > 0 ? 'esm' : 'none');\n`;
    const esm = attachAndRun(folder({ type: 'module' }), 'agent.ts', code);
    expect([esm.status, esm.stdout.trim()]).toEqual([0, 'esm']);
    expect(esm.args.at(-1)).toMatch(/agent\.ts\.mjs$/);
    const mts = attachAndRun(folder(null), 'agent.mts', code);
    expect([mts.status, mts.stdout.trim()]).toEqual([0, 'esm']);
    expect(mts.args.at(-1)).toMatch(/agent\.mts\.mjs$/);
  });
});

describe('a Node agent script attached with bundle', () => {
  /** A folder with a CommonJS package that requires a Node built-in, as `openai`'s dependencies do. */
  function folderWithPackage(packageJson: object): string {
    const dir = folder(packageJson);
    const pkg = join(dir, 'node_modules', 'greeting');
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'greeting', version: '1.0.0', main: 'index.js' }));
    writeFileSync(join(pkg, 'index.js'), `const os = require('node:os');\nexports.greet = () => 'hello from ' + typeof os.cpus;\n`);
    return dir;
  }

  function attach(dir: string, filename: string, code: string) {
    const path = join(dir, filename);
    writeFileSync(path, code);
    const scripts = join(dir, 'snapshots');
    mkdirSync(scripts, { recursive: true });
    return snapshotScript(scripts, 'agent', { path }, 'auto', { bundle: true });
  }

  it('runs as one module that carries its packages: it runs with the packages gone', () => {
    for (const [packageJson, filename, kind] of [
      [{ type: 'module' }, 'agent.ts', 'mjs'],
      [{ name: 'lab-agents' }, 'agent.js', 'cjs'],
    ] as const) {
      const dir = folderWithPackage(packageJson);
      const code = kind === 'mjs' ? `import { greet } from 'greeting';\nconst said: string = greet();\nconsole.log(said);\n` : `const { greet } = require('greeting');\nconsole.log(greet());\n`;
      const script = attach(dir, filename, code);
      rmSync(join(dir, 'node_modules'), { recursive: true });
      const launch = launchCommand(script, { workDir: dir, sandbox: false, dataDir: join(dir, 'data') });
      expect(launch.args.at(-1)).toMatch(new RegExp(`${filename.replace('.', '\\.')}\\.bundle\\.${kind}$`));
      const run = spawnSync(launch.command, launch.args, { cwd: dir, encoding: 'utf8' });
      expect([run.status, run.stdout.trim()]).toEqual([0, 'hello from function']);
    }
  });

  it('is refused at attach, with the reason, when an import cannot be bundled or the script is not a Node one', () => {
    const dir = folderWithPackage({ type: 'module' });
    expect(() => attach(dir, 'agent.ts', `import { nothing } from 'no-such-package';\nconsole.log(nothing);\n`)).toThrow(expect.objectContaining({ name: 'ScriptAttachError' }));
    expect(() => attach(dir, 'agent.py', 'print(1)\n')).toThrow(expect.objectContaining({ name: 'ScriptAttachError' }));
  });
});

describe("an agent's Node process", () => {
  it('starts with the raised WebAssembly tiering budget once the probe has run, under the guards or not', async () => {
    const dir = folder({ type: 'module' });
    const path = join(dir, 'agent.mjs');
    writeFileSync(path, 'console.log(JSON.stringify(process.execArgv));\n');
    mkdirSync(join(dir, 'snapshots'));
    const script = snapshotScript(join(dir, 'snapshots'), 'agent', { path }, 'auto');
    // This Node knows the flag (V8 11 and later), so the probe keeps it.
    await probeAgentV8Flags();
    for (const sandbox of [false, true]) {
      const launch = launchCommand(script, { workDir: dir, sandbox, dataDir: join(dir, 'data') });
      const run = spawnSync(launch.command, launch.args, { cwd: dir, encoding: 'utf8' });
      expect(run.status).toBe(0);
      expect((JSON.parse(run.stdout) as string[]).filter((a) => a.startsWith('--wasm-tiering-budget='))).toEqual(['--wasm-tiering-budget=500000000']);
    }
  });
});
