/**
 * The file extensions of agent scripts, and what each runs under. One list for the runner (picking the runtime,
 * generator task modules), the attach API's upload schema, the CLI and the renderer's drop zone. Pure.
 */

/** Run by python3 (under the audit hook). */
export const PYTHON_SCRIPT_EXTENSIONS: readonly string[] = ['.py'];
/** Run by Node; also what a generator task module or a reward module may be. */
export const NODE_SCRIPT_EXTENSIONS: readonly string[] = ['.js', '.mjs', '.cjs', '.ts', '.mts'];
/** Node scripts that are TypeScript: type-stripped before they run. */
export const TYPESCRIPT_SCRIPT_EXTENSIONS: readonly string[] = ['.ts', '.mts'];
/** Every extension the runner can start. */
export const SCRIPT_EXTENSIONS: readonly string[] = [...PYTHON_SCRIPT_EXTENSIONS, ...NODE_SCRIPT_EXTENSIONS];

/** A bare file name (no folder) ending in one of SCRIPT_EXTENSIONS, case-sensitive like the upload schema. */
export const SCRIPT_FILENAME_PATTERN = new RegExp(`^[^/\\\\]+\\.(${SCRIPT_EXTENSIONS.map((e) => e.slice(1)).join('|')})$`);

/** The extension of `filename`, lower-cased, dot included ('' when it has none). */
export function extensionOf(filename: string): string {
  const base = filename.replace(/^.*[\\/]/, '');
  const dot = base.lastIndexOf('.');
  return dot > 0 ? base.slice(dot).toLowerCase() : '';
}

/** Which runtime the extension of `filename` picks, or undefined when it is not a script. */
export function runtimeForExtension(filename: string): 'node' | 'python' | undefined {
  const ext = extensionOf(filename);
  if (PYTHON_SCRIPT_EXTENSIONS.includes(ext)) return 'python';
  if (NODE_SCRIPT_EXTENSIONS.includes(ext)) return 'node';
  return undefined;
}

/** `folder/my agent.v2.py` → `my agent.v2`: the base name without a script extension (other extensions stay). */
export function stripScriptExtension(filename: string): string {
  const base = filename.replace(/^.*[\\/]/, '');
  // By suffix, not extensionOf: a file named just ".py" is all extension here.
  const ext = SCRIPT_EXTENSIONS.find((e) => base.toLowerCase().endsWith(e));
  return ext ? base.slice(0, base.length - ext.length) : base;
}
