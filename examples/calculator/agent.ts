/**
 * A multi-turn tool-use agent: the model may call `calculate(expression)` (OpenAI function calling through the
 * official `openai` client) as often as it likes, then answers. The script prints its final answer as
 * `{"answer": "..."}`; reward.ts (the environment's grader) turns that into the reward, never the model.
 */
import OpenAI from 'openai';

interface Task {
  id: string;
  question: string;
  answer: number;
}

const MAX_TURNS = 3;
const task = JSON.parse(process.env.AGENTJET_TASK!) as Task;
const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
const model = process.env.AGENTJET_MODEL ?? 'gpt-4o-mini';

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'calculate',
      description: 'Evaluate an arithmetic expression with + - * / and parentheses.',
      parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    },
  },
];

/** The tool: arithmetic only (digits, operators, parentheses), so the model cannot run code through it. */
function calculate(expression: string): string {
  if (!/^[\d\s+\-*/().]+$/.test(expression)) return 'error: only numbers, + - * / and parentheses are allowed';
  try {
    const value = Function(`"use strict"; return (${expression});`)() as number;
    return Number.isFinite(value) ? String(value) : 'error: not a finite number';
  } catch {
    return 'error: not a valid expression';
  }
}

const messages: OpenAI.ChatCompletionMessageParam[] = [
  { role: 'system', content: 'Solve the problem. Use the calculate tool for arithmetic. Reply with the final number only.' },
  { role: 'user', content: task.question },
];
let answer = '';
for (let turn = 0; turn < MAX_TURNS; turn++) {
  const completion = await openai.chat.completions.create({ model, messages, tools, max_tokens: 48 });
  const message = completion.choices[0].message;
  messages.push(message);
  if (!message.tool_calls?.length) {
    answer = message.content ?? '';
    break;
  }
  for (const call of message.tool_calls) {
    if (call.type !== 'function') continue;
    let expression = '';
    try {
      expression = String((JSON.parse(call.function.arguments) as { expression?: unknown }).expression ?? '');
    } catch {
      expression = '';
    }
    messages.push({ role: 'tool', tool_call_id: call.id, content: calculate(expression) });
  }
}
console.log(JSON.stringify({ answer, turns: messages.length }));
