/**
 * Attached scripts: each version is snapshotted (copied under `<dataDir>/scripts/<name>/<hash>/`) so that the
 * content hash recorded with every episode is what actually ran, and editing the original file changes nothing
 * until it is attached again (hot swap). A `node_modules` link beside the copy lets it import the packages its
 * original location saw (or the app's: `openai` and friends).
 */
import { createHash } from 'node:crypto';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync, transformSync } from 'esbuild';
import type { ScriptRuntime } from '../../common/runner-api.ts';
import { SCRIPT_EXTENSIONS, TYPESCRIPT_SCRIPT_EXTENSIONS, runtimeForExtension } from '../../common/script-extensions.ts';
import { ScriptAttachError } from './errors.ts';
import { checkPythonSyntax } from './python-check.ts';
import { writeFileAtomic } from '../atomic-file.ts';

export interface ScriptVersion {
  name: string;
  /** sha256 of the content, hex. */
  hash: string;
  /** The snapshot that runs. */
  file: string;
  /**
   * What runs, when not `file` itself: a TypeScript script transpiled once at attach, to the module kind its folder
   * gives (`.mjs` or `.cjs`) — starting tsx for every episode cost ~1 s of CPU against ~0.2 s for the plain module
   * (tsx's loader and an esbuild process each time), which loaded a 2-core machine more than the model did — or,
   * with `bundle`, a Node script and the packages it imports as one module (scriptBundle).
   */
  compiled?: string;
  runtime: 'node' | 'python';
  /** Where it came from (a path, or "upload:<filename>"). */
  origin: string;
}

const APP_NODE_MODULES = fileURLToPath(new URL('../../../node_modules', import.meta.url));
const PYTHON_GUARD = fileURLToPath(new URL('./python-guard.py', import.meta.url));

function isTypeScript(file: string): boolean {
  return TYPESCRIPT_SCRIPT_EXTENSIONS.includes(extname(file).toLowerCase());
}

export function hashContent(content: string | Buffer): string {
  return createHash('sha256').update(content).digest('hex');
}

export function resolveRuntime(filename: string, runtime: ScriptRuntime): 'node' | 'python' {
  if (runtime !== 'auto') return runtime;
  const picked = runtimeForExtension(filename);
  if (picked) return picked;
  throw new ScriptAttachError(`cannot tell how to run "${filename}": use a ${SCRIPT_EXTENSIONS.join(', ')} file, or say runtime: node|python`);
}

export function snapshotScript(
  scriptsDir: string,
  name: string,
  source: { path: string } | { content: string; filename: string },
  runtime: ScriptRuntime,
  options: { bundle?: boolean } = {},
): ScriptVersion {
  let content: Buffer;
  let filename: string;
  let nodeModules = APP_NODE_MODULES;
  // Uploads are ES modules (top-level await works); a file keeps the module type of the package it came from.
  let moduleType = 'module';
  let origin: string;
  if ('path' in source) {
    const path = resolve(source.path);
    try {
      content = readFileSync(path);
    } catch (err) {
      throw new ScriptAttachError(`cannot read script ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    filename = basename(path);
    nodeModules = nearestNodeModules(dirname(path)) ?? APP_NODE_MODULES;
    moduleType = nearestModuleType(dirname(path));
    origin = path;
  } else {
    content = Buffer.from(source.content, 'utf8');
    filename = source.filename;
    origin = `upload:${filename}`;
  }
  const resolvedRuntime = resolveRuntime(filename, runtime);
  if (options.bundle && resolvedRuntime !== 'node') throw new ScriptAttachError(`bundle applies to Node scripts; ${filename} runs on ${resolvedRuntime}`);
  const hash = hashContent(content);
  const dir = join(scriptsDir, name, hash.slice(0, 16));
  const file = join(dir, filename);
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true });
    writeFileAtomic(file, content);
    if (existsSync(nodeModules)) symlinkSync(nodeModules, join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: moduleType }) + '\n');
  }
  const fileModuleType = /\.m[jt]s$/i.test(filename) ? 'module' : /\.c[jt]s$/i.test(filename) ? 'commonjs' : moduleType;
  const compiled = options.bundle ? scriptBundle(file, fileModuleType) : isTypeScript(file) ? transpile(file, content, fileModuleType) : undefined;
  if (resolvedRuntime === 'python') checkPythonSyntax(pythonExecutable(), file, filename);
  return { name, hash, file, runtime: resolvedRuntime, origin, compiled };
}

/**
 * Type-strips a TypeScript script once per version, as the module kind it runs as under tsx in its folder (ESM for
 * `"type": "module"` and `.mts`, CommonJS otherwise); a syntax error is an attach error, not N failed episodes.
 */
function transpile(file: string, content: Buffer, moduleType: string): string {
  const esm = moduleType === 'module';
  const out = `${file}.${esm ? 'mjs' : 'cjs'}`;
  if (existsSync(out)) return out;
  let code: string;
  try {
    code = transformSync(content.toString('utf8'), { loader: 'ts', format: esm ? 'esm' : 'cjs', target: 'node20', sourcefile: basename(file) }).code;
  } catch (err) {
    throw new ScriptAttachError(`${basename(file)} does not compile: ${(err as Error).message}`);
  }
  writeFileAtomic(out, code);
  return out;
}

/**
 * An ES module bundle needs `require` for the CommonJS packages inside it (they require Node's built-ins); set on
 * globalThis, so that a script declaring its own `require` does not clash with it.
 */
const ESM_BUNDLE_BANNER = "import * as agentjetNodeModule from 'node:module'; globalThis.require ??= agentjetNodeModule.createRequire(import.meta.url);";

/**
 * The script and every package it imports (resolved from its folder's node_modules link) bundled into one module,
 * written at each attach (the packages may have changed since). A process then loads one file instead of each
 * package's tree: the calculator agent with the `openai` client starts on ~0.05 s of CPU instead of ~0.11 s here,
 * about a minute of a 2-core machine over the demo's episodes. Asked for, not the default: a bundle breaks packages
 * that read files beside their own code (wasm, data files) or load native addons.
 */
function scriptBundle(file: string, moduleType: string): string {
  const esm = moduleType === 'module';
  const out = `${file}.bundle.${esm ? 'mjs' : 'cjs'}`;
  let code: Uint8Array;
  try {
    code = buildSync({
      entryPoints: [file],
      outfile: out,
      write: false,
      bundle: true,
      platform: 'node',
      format: esm ? 'esm' : 'cjs',
      target: 'node20',
      logLevel: 'silent',
      ...(esm ? { banner: { js: ESM_BUNDLE_BANNER } } : {}),
    }).outputFiles[0].contents;
  } catch (err) {
    const first = (err as { errors?: Array<{ text: string }> }).errors?.[0]?.text ?? (err as Error).message;
    throw new ScriptAttachError(`${basename(file)} cannot be bundled: ${first} (attach it without bundle to run it as it is)`);
  }
  writeFileAtomic(out, code);
  return out;
}

function nearestNodeModules(from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules');
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

function nearestModuleType(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate)) {
      try {
        return (JSON.parse(readFileSync(candidate, 'utf8')) as { type?: string }).type === 'module' ? 'module' : 'commonjs';
      } catch {
        return 'commonjs';
      }
    }
    if (dirname(dir) === dir) return 'commonjs';
  }
}

/**
 * V8's budget before a WebAssembly function tiers up from its baseline code to optimized code, in an agent's Node
 * process: ~280 times V8 11's default (1,800,000). Node's fetch, and so the OpenAI client, parses HTTP in
 * WebAssembly (undici's llhttp), and at the default budget an agent's first few responses already tier the parser
 * up in background threads, which a process making a handful of calls never earns back. Measured on the bundled
 * OpenAI client against a local server (CPU per process, all threads): 1 call 187 ms at the default, 148 at ten
 * times it; 4 calls 203 ms at the default, 230 at ten times it (the budget ran out at the third response and the
 * tier-up came anyway), 166 at this budget; 30 calls 254 against 207 — the same as `--liftoff-only` (no tier-up at
 * all) each time. Wasm that keeps running still tiers up, later.
 */
const AGENT_WASM_TIERING_BUDGET = 500_000_000;

/** Starting Node with an empty script takes tens of milliseconds; this bounds a hung probe. */
const FLAG_PROBE_TIMEOUT_MS = 10_000;

let v8Flags: string[] = [];
let v8FlagsProbe: Promise<void> | undefined;

/**
 * Finds out, once per process, the V8 flags an agent's Node process starts with: the tiering budget where this Node
 * knows the flag (an unknown V8 flag makes node refuse to start, which would fail every episode). Asynchronous, so
 * that the peer's main thread never blocks on a node start; until it has settled, agents start without the flag.
 */
export function probeAgentV8Flags(): Promise<void> {
  v8FlagsProbe ??= new Promise<void>((settle) => {
    const flag = `--wasm-tiering-budget=${AGENT_WASM_TIERING_BUDGET}`;
    const env = { ...nodeRuntimeEnv(), PATH: process.env.PATH ?? '' };
    execFile(process.execPath, [flag, '-e', ''], { env, timeout: FLAG_PROBE_TIMEOUT_MS }, (err) => {
      if (!err) v8Flags = [flag];
      settle();
    });
  });
  return v8FlagsProbe;
}

export interface LaunchOptions {
  workDir: string;
  sandbox: boolean;
  /** The peer's data directory: off limits to scripts. */
  dataDir: string;
}

/** The command line for one run of a script version. */
export function launchCommand(script: ScriptVersion, options: LaunchOptions): { command: string; args: string[] } {
  const scriptDir = dirname(script.file);
  if (script.runtime === 'python') {
    if (!options.sandbox) return { command: pythonExecutable(), args: [script.file] };
    const policy = JSON.stringify({ deny: [options.dataDir], allow: [scriptDir] });
    return { command: pythonExecutable(), args: [PYTHON_GUARD, policy, script.file] };
  }
  // TypeScript runs as the version transpiled at attach time, sandboxed or not.
  const entry = script.compiled ?? script.file;
  if (options.sandbox) return { command: process.execPath, args: [...v8Flags, ...nodePermissionFlags(script, options), entry] };
  return { command: process.execPath, args: [...v8Flags, entry] };
}

/**
 * Node's permission model: reads only in the script's folder (its node_modules link included) and its work dir,
 * writes only in the work dir; no child processes, worker threads or native addons.
 */
function nodePermissionFlags(script: ScriptVersion, options: LaunchOptions): string[] {
  const scriptDir = dirname(script.file);
  const reads = [`${scriptDir}/*`, `${options.workDir}/*`];
  const linked = join(scriptDir, 'node_modules');
  if (existsSync(linked)) reads.push(`${realpathSync(linked)}/*`);
  return [PERMISSION_FLAG, ...reads.map((r) => `--allow-fs-read=${r}`), `--allow-fs-write=${options.workDir}/*`, '--no-warnings'];
}

/** Node 20 spells it --experimental-permission; newer Node (and Electron's) --permission. */
const PERMISSION_FLAG = process.allowedNodeEnvironmentFlags.has('--permission') ? '--permission' : '--experimental-permission';

/** Inside Electron, process.execPath is the app: this makes it behave as plain Node for the script. */
export function nodeRuntimeEnv(): Record<string, string> {
  return process.versions.electron ? { ELECTRON_RUN_AS_NODE: '1' } : {};
}


let python: string | undefined;
/** The real interpreter behind `python3` (version-manager shims need the HOME the script does not get). */
export function pythonExecutable(): string {
  if (python) return python;
  try {
    python = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();
  } catch {
    throw new ScriptAttachError('python3 was not found on PATH; install Python 3 to run .py agent scripts');
  }
  return python;
}
