/**
 * The calculator task format as the builtin model's warm start and the demo need it: the agent's own prompt and
 * tool and first messages (imported from the example, so that they are defined once) and arithmetic tasks.
 */
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { calc, firstMessages as agentFirstMessages, TOOLS } from '../../../examples/calculator/agent.ts';
import { seededRandom as rng } from '../../../worker/common/random.ts';

export interface CalcTask {
  id: string;
  question: string;
  expression: string;
  answer: number;
}

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

/** The agent's opening messages (system prompt and question), as the builtin template renders them. */
export function firstMessages(task: CalcTask): ChatMessage[] {
  // The agent writes only string contents, which is what ChatMessage holds.
  return agentFirstMessages(task) as ChatMessage[];
}
