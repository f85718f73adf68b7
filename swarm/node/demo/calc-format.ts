/**
 * The calculator task format as the builtin model's warm start and the demo need it: the agent's own prompt and
 * tool (imported from the example, so that they are defined once), arithmetic tasks, and the reward (1 iff the
 * final answer is the right number).
 */
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { calc, SYSTEM_PROMPT, TOOLS } from '../../../examples/calculator/agent.ts';

export interface CalcTask {
  id: string;
  question: string;
  expression: string;
  answer: number;
}

export const CALC_SYSTEM_PROMPT = SYSTEM_PROMPT;

export const CALC_TOOL: ToolSpec = TOOLS[0] as ToolSpec;

const OPS = ['+', '-', '*'] as const;

import { seededRandom as rng } from '../../../worker/common/random.ts';

export { rng };

export function evaluateExpression(expr: string): number | null {
  const value = calc(expr);
  return value === 'error' ? null : Number(value);
}

export function makeTasks(count: number, seed: number, prefix: string): CalcTask[] {
  const rand = rng(seed);
  const tasks: CalcTask[] = [];
  for (let i = 0; i < count; i++) {
    const a = Math.floor(rand() * 100);
    const b = Math.floor(rand() * 100);
    const op = OPS[Math.floor(rand() * OPS.length)];
    const expression = `${a}${op}${b}`;
    tasks.push({ id: `${prefix}-${i}`, question: `What is ${expression}?`, expression, answer: evaluateExpression(expression)! });
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
