/**
 * Turning a finished script into a result: the last stdout line `{"reward": n, …}` (or `{"rewards": {role: n}}`
 * for a team), or, when the client has a reward module, whatever that module computes from the task and the
 * script's output. Anything else is a failed episode with the reason said plainly.
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { scriptResultSchema, type ScriptResult, type Task } from '../../common/runner-api.ts';
import { RewardModuleError } from './errors.ts';

export type Outcome = { ok: true; result: ScriptResult } | { ok: false; reason: string };

export function parseResultLine(line: string): Outcome {
  if (line === '') return { ok: false, reason: 'no result: the script printed nothing on stdout' };
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { ok: false, reason: `no result: the last stdout line is not JSON: ${clip(line)}` };
  }
  return checkResult(value, 'the last stdout line');
}

function checkResult(value: unknown, where: string): Outcome {
  const parsed = scriptResultSchema.safeParse(value);
  if (!parsed.success) {
    return { ok: false, reason: `no result: ${where} is not {"reward": number} or {"rewards": {role: number}}: ${clip(JSON.stringify(value) ?? String(value))}` };
  }
  return { ok: true, result: parsed.data };
}

function clip(text: string): string {
  return text.length > 200 ? text.slice(0, 200) + '…' : text;
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
    return { ok: false, reason: `reward module threw: ${(err as Error).name}: ${(err as Error).message}` };
  }
  return checkResult(typeof value === 'number' ? { reward: value } : value, 'the reward module’s answer');
}
