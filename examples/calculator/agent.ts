/**
 * A multi-turn tool-use agent: the model may call `calc(expr)` (OpenAI function calling through the official
 * `openai` client), then answers. The script prints its final answer as `{"answer": "..."}`; reward.ts (the
 * environment's grader) turns that into the reward, never the model.
 *
 * The prompt and the tool are exported so that the builtin model's warm start (swarm/node/demo/sft-corpus.ts) is
 * trained on exactly what this agent sends; they are short on purpose, since a tiny byte-level model reads every
 * character. Importing the file runs nothing: the agent runs only as a script.
 */
import OpenAI from 'openai';
import { pathToFileURL } from 'node:url';

export interface CalcTask {
  id: string;
  question: string;
  expression: string;
  answer: number;
  split?: string;
}

export const SYSTEM_PROMPT = 'Use calc.';

export const TOOLS: OpenAI.ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: {
      name: 'calc',
      description: 'Evaluate arithmetic',
      parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
    },
  },
];

export const MAX_TURNS = 4;

/** The tool: two integers and one of + - * (nothing else is evaluated). */
export function calc(expr: string): string {
  const m = /^\s*(-?\d+)\s*([+\-*])\s*(-?\d+)\s*$/.exec(expr);
  if (!m) return 'error';
  const a = Number(m[1]);
  const b = Number(m[3]);
  return String(m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b);
}

/** The `expr` argument of a `calc` call ('' when the arguments are not a JSON object with one). */
export function callExpression(argumentsJson: string): string {
  try {
    return String((JSON.parse(argumentsJson) as { expr?: unknown }).expr ?? '');
  } catch {
    return '';
  }
}

export function firstMessages(task: Pick<CalcTask, 'question'>): OpenAI.ChatCompletionMessageParam[] {
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: task.question },
  ];
}

async function main(): Promise<void> {
  const task = JSON.parse(process.env.AGENTJET_TASK!) as CalcTask;
  const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
  const model = process.env.AGENTJET_MODEL ?? 'gpt-4o-mini';
  const messages = firstMessages(task);
  let answer = '';
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const completion = await openai.chat.completions.create({ model, messages, tools: TOOLS, max_tokens: 64 });
    const message = completion.choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) {
      answer = message.content ?? '';
      break;
    }
    for (const call of message.tool_calls) {
      if (call.type !== 'function') continue;
      messages.push({ role: 'tool', tool_call_id: call.id, content: calc(callExpression(call.function.arguments)) });
    }
  }
  console.log(JSON.stringify({ answer, turns: messages.length }));
}

// Run only as a script: the warm start imports the constants above.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
