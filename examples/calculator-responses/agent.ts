/**
 * The calculator agent written against OpenAI's Responses API with the official `openai` client: the model may call
 * `calc(expr)` (a `function_call` item, answered with a `function_call_output`), then answers. Each turn sends only
 * the new items and chains to the previous answer with `previous_response_id` (the peer rebuilds the conversation
 * from the episode's record). It prints its final answer as `{"answer": "..."}`; the calculator's grader turns that
 * into the reward:
 *
 *   agentjet attach examples/calculator-responses/agent.ts --tasks examples/calculator/tasks.jsonl \
 *     --reward examples/calculator/reward.ts --model tiny --alias gpt-4o-mini
 *
 * One file on purpose: a script is copied when attached.
 */
import OpenAI from 'openai';

interface CalcTask {
  question: string;
}

const INSTRUCTIONS = 'Use calc.';
const TOOLS: OpenAI.Responses.FunctionTool[] = [
  {
    type: 'function',
    name: 'calc',
    description: 'Evaluate arithmetic',
    parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
    strict: false,
  },
];
/** A tool round per turn; past this the agent gives up rather than loop. */
const MAX_TURNS = 4;
/** The builtin model's answers are short; a real model's would need more. */
const MAX_OUTPUT_TOKENS = 64;

/** The tool: two integers and one of + - * (nothing else is evaluated). */
function calc(expr: string): string {
  const m = /^\s*(-?\d+)\s*([+\-*])\s*(-?\d+)\s*$/.exec(expr);
  if (!m) return 'error';
  const a = Number(m[1]);
  const b = Number(m[3]);
  return String(m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b);
}

function expression(argumentsJson: string): string {
  try {
    return String((JSON.parse(argumentsJson) as { expr?: unknown }).expr ?? '');
  } catch {
    return '';
  }
}

const task = JSON.parse(process.env.AGENTJET_TASK!) as CalcTask;
const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
const model = process.env.AGENTJET_MODEL ?? 'gpt-4o-mini';
let input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: task.question }];
let previous: string | undefined;
let answer = '';
let turns = 0;
for (; turns < MAX_TURNS; turns++) {
  const response = await openai.responses.create({ model, instructions: INSTRUCTIONS, tools: TOOLS, input, previous_response_id: previous, max_output_tokens: MAX_OUTPUT_TOKENS });
  previous = response.id;
  const calls = response.output.filter((item) => item.type === 'function_call');
  if (calls.length === 0) {
    answer = response.output_text;
    break;
  }
  input = calls.map((call) => ({ type: 'function_call_output' as const, call_id: call.call_id, output: calc(expression(call.arguments)) }));
}
console.log(JSON.stringify({ answer, turns }));
