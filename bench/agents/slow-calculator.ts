/**
 * The calculator agent (examples/calculator/agent.ts) with an environment that takes its time, for
 * `npm run bench -- async`: every tool call answers after TOOL_LATENCY_MS, and a long tail of episodes (SLOW_SHARE
 * of the tasks, chosen by task id so every mode sees the same ones) waits SLOW_FACTOR times longer. The prompt, the
 * tool and the answer format are the calculator's own, so its grader and warm start apply unchanged. They are
 * repeated here because an attached script is one file, copied alone: it cannot import the example.
 */
import OpenAI from 'openai';

interface CalcTask {
  id: string;
  question: string;
}

const SYSTEM_PROMPT = 'Use calc.';
const TOOLS: OpenAI.ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: {
      name: 'calc',
      description: 'Evaluate arithmetic',
      parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
    },
  },
];
const MAX_TURNS = 4;

/** Two integers and one of + - * (the calculator's tool). */
function calc(argumentsJson: string): string {
  let expr = '';
  try {
    expr = String((JSON.parse(argumentsJson) as { expr?: unknown }).expr ?? '');
  } catch {
    return 'error';
  }
  const m = /^\s*(-?\d+)\s*([+\-*])\s*(-?\d+)\s*$/.exec(expr);
  if (!m) return 'error';
  const [a, b] = [Number(m[1]), Number(m[3])];
  return String(m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b);
}

/** A slow tool or environment step, as agents meet them (a web request, a code run). */
const TOOL_LATENCY_MS = 200;
/** The long tail: this share of the tasks … */
const SLOW_SHARE = 0.05;
/** … waits this many times longer per tool call. */
const SLOW_FACTOR = 10;

/** A stable fraction in [0, 1) from the task id (FNV-1a), so the slow tasks are the same in every mode. */
function taskFraction(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193) >>> 0;
  return h / 2 ** 32;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const task = JSON.parse(process.env.AGENTJET_TASK!) as CalcTask;
  const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
  const model = process.env.AGENTJET_MODEL ?? 'gpt-4o-mini';
  const latency = TOOL_LATENCY_MS * (taskFraction(task.id) < SLOW_SHARE ? SLOW_FACTOR : 1);
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: task.question },
  ];
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
      await sleep(latency);
      messages.push({ role: 'tool', tool_call_id: call.id, content: calc(call.function.arguments) });
    }
  }
  console.log(JSON.stringify({ answer, turns: messages.length }));
}

await main();
