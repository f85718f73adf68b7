/**
 * The calculator task format as the builtin model's warm start and the demo need it: the agent's own prompt and
 * tool (imported from the example, so that they are defined once), arithmetic tasks, and the reward (1 iff the
 * final answer is the right number).
 */
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { calc, SYSTEM_PROMPT, TOOLS } from '../../../examples/calculator/agent.ts';
import { seededRandom as rng } from '../../../worker/common/random.ts';

export interface CalcTask {
  id: string;
  question: string;
  expression: string;
  answer: number;
}

export const CALC_SYSTEM_PROMPT = SYSTEM_PROMPT;

export const CALC_TOOL: ToolSpec = TOOLS[0] as ToolSpec;

const OPS = ['+', '-', '*'] as const;

export { rng };

export function evaluateExpression(expr: string): number | null {
  const value = calc(expr);
  return value === 'error' ? null : Number(value);
}

/**
 * One expression in five is held out, whatever the seed: the warm start and the train tasks never contain them
 * and every evaluation draws only from them, so "held-out" means never seen, not merely another sample.
 */
export function isHeldOutExpression(expression: string): boolean {
  let h = 0;
  for (const ch of expression) h = (h * 31 + ch.charCodeAt(0)) % 1_000_003;
  return h % 5 === 0;
}

/**
 * `count` arithmetic tasks (two two-digit numbers and one of + - *), held-out expressions only or none of them.
 * Two digits each, so every expression is five characters: the builtin model copies it into its tool call from a
 * fixed distance, which a tiny model learns in a few hundred steps (variable widths take thousands).
 */
export function makeTasks(count: number, seed: number, prefix: string, heldOut: boolean): CalcTask[] {
  const rand = rng(seed);
  const tasks: CalcTask[] = [];
  while (tasks.length < count) {
    const a = 10 + Math.floor(rand() * 90);
    const b = 10 + Math.floor(rand() * 90);
    const op = OPS[Math.floor(rand() * OPS.length)];
    const expression = `${a}${op}${b}`;
    if (isHeldOutExpression(expression) !== heldOut) continue;
    tasks.push({ id: `${prefix}-${tasks.length}`, question: `What is ${expression}?`, expression, answer: evaluateExpression(expression)! });
  }
  return tasks;
}

export function firstMessages(task: CalcTask): ChatMessage[] {
  return [
    { role: 'system', content: CALC_SYSTEM_PROMPT },
    { role: 'user', content: task.question },
  ];
}

/** The final answer is right when the last number in it is the task's answer. */
export function rewardFor(task: CalcTask, finalText: string): number {
  const numbers = finalText.match(/-?\d+/g);
  return numbers && Number(numbers[numbers.length - 1]) === task.answer ? 1 : 0;
}
