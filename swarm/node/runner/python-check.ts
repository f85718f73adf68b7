/**
 * Compile-checks a Python script at attach time, so that a syntax error is one refused attach naming file:line,
 * not a run of aborted episodes that trips the circuit breaker. Compiled in memory (no __pycache__ beside the
 * snapshot); the script is not run.
 */
import { spawnSync } from 'node:child_process';
import { ScriptSyntaxError } from './errors.ts';

/** Compiling a script takes milliseconds; an interpreter that hangs must not hold the attach request. */
const PYTHON_CHECK_TIMEOUT_MS = 15_000;

/** Prints `line<TAB>message` of the first syntax error and exits 3; exits 0 when the file compiles. */
const CHECK = `
import sys
path = sys.argv[1]
try:
    compile(open(path, 'rb').read(), path, 'exec')
except SyntaxError as e:
    print(f"{e.lineno or 0}\\t{e.msg}")
    sys.exit(3)
`;
const SYNTAX_ERROR_EXIT = 3;

/** Throws ScriptSyntaxError when `file` does not compile; `shownAs` is the name the error uses (the original's). */
export function checkPythonSyntax(python: string, file: string, shownAs: string): void {
  const result = spawnSync(python, ['-c', CHECK, file], { encoding: 'utf8', timeout: PYTHON_CHECK_TIMEOUT_MS });
  // A check that could not run (timeout, no interpreter) does not block the attach: the run reports what is wrong.
  if (result.status !== SYNTAX_ERROR_EXIT) return;
  const [line, ...message] = result.stdout.trim().split('\t');
  const location = `${shownAs}:${line}`;
  throw new ScriptSyntaxError(`${location}: Python syntax error: ${message.join('\t')}`, location);
}
