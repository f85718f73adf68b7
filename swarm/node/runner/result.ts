/**
 * Judging a finished script: what its process's end means (a limit, a crash, a non-zero exit), then its result —
 * the last stdout line `{"reward": n, …}` (or `{"rewards": {role: n}}` for a team), or, when the client has a
 * reward module, whatever that module computes from the task and the script's output — and the reward of each
 * role. Anything else is a failed run: a code to act on, and the reason said plainly beside it.
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { scriptResultSchema, type RunAbort, type RunAbortCode, type ScriptResult, type Task } from '../../common/runner-api.ts';
import { RewardModuleError } from './errors.ts';
import type { ProcessResult } from './process.ts';

export type Outcome = { ok: true; result: ScriptResult } | { ok: false; abort: RunAbort };

/** Result lines and answers quoted in a reason are cut here: enough to recognise, not the whole output. */
const QUOTE_CHARS = 200;
/** The stderr line quoted when a script fails: its last words, usually the exception. */
const STDERR_LINE_CHARS = 300;

const failed = (code: RunAbortCode, reason: string): Outcome => ({ ok: false, abort: { code, reason } });

export interface Limits {
  timeLimitS: number;
  outputIdleS: number;
}

/** Why the process's end is a failure; undefined when it exited 0 on its own. */
export function processFailure(proc: ProcessResult, limits: Limits): RunAbort | undefined {
  if (proc.spawnError) return { code: 'spawn_failed', reason: `could not start the script: ${proc.spawnError}` };
  if (proc.killedFor === 'time-limit') return { code: 'time_limit', reason: `time limit of ${limits.timeLimitS} s exceeded; the process tree was killed` };
  if (proc.killedFor === 'output-idle') return { code: 'output_idle', reason: `no output for ${limits.outputIdleS} s; the process tree was killed` };
  if (proc.signal) return { code: 'script_crashed', reason: `the script crashed (killed by ${proc.signal})${lastErrorLine(proc)}` };
  if (proc.exitCode !== 0) return { code: 'script_failed', reason: `the script exited with code ${proc.exitCode}${lastErrorLine(proc)}` };
  return undefined;
}

function lastErrorLine(proc: ProcessResult): string {
  const line = proc.stderr.trim().split('\n').at(-1)?.trim();
  return line ? `: ${line.slice(0, STDERR_LINE_CHARS)}` : '';
}

export function parseResultLine(line: string): Outcome {
  if (line === '') return failed('no_result', 'no result: the script printed nothing on stdout');
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return failed('no_result', `no result: the last stdout line is not JSON: ${clip(line)}`);
  }
  return checkResult(value, 'the last stdout line', 'no_result');
}

function checkResult(value: unknown, where: string, code: RunAbortCode): Outcome {
  const parsed = scriptResultSchema.safeParse(value);
  if (!parsed.success) {
    return failed(code, `no result: ${where} is not {"reward": number} or {"rewards": {role: number}}: ${clip(JSON.stringify(value) ?? String(value))}`);
  }
  return { ok: true, result: parsed.data };
}

function clip(text: string): string {
  return text.length > QUOTE_CHARS ? text.slice(0, QUOTE_CHARS) + '…' : text;
}

/** The reward of each role, or why the result does not give one for every role. */
export function rewardsPerRole(result: ScriptResult, roles: string[], team: boolean): { ok: true; rewards: Record<string, number> } | { ok: false; abort: RunAbort } {
  if ('reward' in result) return { ok: true, rewards: Object.fromEntries(roles.map((r) => [r, result.reward])) };
  if (!team) return { ok: false, abort: { code: 'no_result', reason: 'no result: a single-model script reports {"reward": n}, not "rewards"' } };
  const missing = roles.filter((r) => !(r in result.rewards));
  if (missing.length > 0) {
    return { ok: false, abort: { code: 'role_reward_missing', reason: `no result: "rewards" has no reward for role ${missing.map((m) => `"${m}"`).join(', ')}` } };
  }
  return { ok: true, rewards: Object.fromEntries(roles.map((r) => [r, result.rewards[r]])) };
}

/** What a reward module sees: the task, the script's last stdout line parsed as JSON (null if not JSON), stdout. */
export interface RewardInput {
  task: Task;
  output: unknown;
  stdout: string;
}
export type RewardFunction = (input: RewardInput) => unknown;

export async function loadRewardModule(path: string): Promise<RewardFunction> {
  const file = resolve(path);
  let mod: { default?: unknown; reward?: unknown };
  try {
    mod = (await import(pathToFileURL(file).href)) as typeof mod;
  } catch (err) {
    throw new RewardModuleError(`cannot load reward module ${file}: ${(err as Error).message}`);
  }
  const fn = mod.default ?? mod.reward;
  if (typeof fn !== 'function') throw new RewardModuleError(`${file} must export default (or export reward) a function ({task, output, stdout}) => number`);
  return fn as RewardFunction;
}

export async function rewardFromModule(fn: RewardFunction, task: Task, lastLine: string, stdout: string): Promise<Outcome> {
  let output: unknown = null;
  try {
    output = JSON.parse(lastLine);
  } catch {
    // Not JSON: the module gets null and can still read stdout.
  }
  let value: unknown;
  try {
    value = await fn({ task, output, stdout });
  } catch (err) {
    return failed('reward_module_failed', `reward module threw: ${(err as Error).name}: ${(err as Error).message}`);
  }
  return checkResult(typeof value === 'number' ? { reward: value } : value, 'the reward module’s answer', 'reward_module_failed');
}
