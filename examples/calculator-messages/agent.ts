/**
 * The calculator agent written against Anthropic's Messages API with the official `@anthropic-ai/sdk`: the model may
 * call `calc(expr)` (a `tool_use` block, answered with a `tool_result`), then answers. It prints its final answer as
 * `{"answer": "..."}`; the calculator's grader turns that into the reward:
 *
 *   agentjet attach examples/calculator-messages/agent.ts --tasks examples/calculator/tasks.jsonl \
 *     --reward examples/calculator/reward.ts --model tiny --alias claude-sonnet-4-5
 *
 * Anthropic's clients take the origin as their base URL (they append /v1/messages). The peer gives agents
 * ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY; where it gives only the OpenAI pair, the origin of OPENAI_BASE_URL and
 * the same episode key serve. One file on purpose: a script is copied when attached.
 */
import Anthropic from '@anthropic-ai/sdk';

interface CalcTask {
  question: string;
}

const SYSTEM_PROMPT = 'Use calc.';
const TOOLS: Anthropic.Tool[] = [
  {
    name: 'calc',
    description: 'Evaluate arithmetic',
    input_schema: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
  },
];
/** A tool round per turn; past this the agent gives up rather than loop. */
const MAX_TURNS = 4;
/** The builtin model's answers are short; a real model's would need more. */
const MAX_TOKENS = 64;

/** The tool: two integers and one of + - * (nothing else is evaluated). */
function calc(expr: string): string {
  const m = /^\s*(-?\d+)\s*([+\-*])\s*(-?\d+)\s*$/.exec(expr);
  if (!m) return 'error';
  const a = Number(m[1]);
  const b = Number(m[3]);
  return String(m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b);
}

function baseUrl(): string | undefined {
  if (process.env.ANTHROPIC_BASE_URL) return process.env.ANTHROPIC_BASE_URL;
  return process.env.OPENAI_BASE_URL ? new URL(process.env.OPENAI_BASE_URL).origin : undefined;
}

const task = JSON.parse(process.env.AGENTJET_TASK!) as CalcTask;
const client = new Anthropic({ baseURL: baseUrl(), apiKey: process.env.ANTHROPIC_API_KEY ?? process.env.OPENAI_API_KEY, maxRetries: 0 });
const model = process.env.AGENTJET_MODEL ?? 'claude-sonnet-4-5';
const messages: Anthropic.MessageParam[] = [{ role: 'user', content: task.question }];
let answer = '';
for (let turn = 0; turn < MAX_TURNS; turn++) {
  const message = await client.messages.create({ model, system: SYSTEM_PROMPT, tools: TOOLS, messages, max_tokens: MAX_TOKENS });
  messages.push({ role: 'assistant', content: message.content });
  const uses = message.content.filter((block) => block.type === 'tool_use');
  if (message.stop_reason !== 'tool_use' || uses.length === 0) {
    answer = message.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('');
    break;
  }
  messages.push({
    role: 'user',
    content: uses.map((use) => ({ type: 'tool_result' as const, tool_use_id: use.id, content: calc(String((use.input as { expr?: unknown }).expr ?? '')) })),
  });
}
console.log(JSON.stringify({ answer, turns: messages.length }));
