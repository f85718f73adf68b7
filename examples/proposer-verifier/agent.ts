/**
 * A two-model team: the proposer answers an arithmetic question (it may call `calc`), the verifier checks the
 * proposed answer (its `calc` also checks a claim: `34*80==2600` gives false) and says accept or reject. The
 * environment (this script) knows the answer and rewards each role separately:
 *   proposer: 1 when its answer is right;  verifier: 1 when its verdict is right (accept a right answer, reject a
 *   wrong one). The team succeeds when the proposer's right answer is accepted.
 * The verifier judges planted answers too (answersToJudge): in training right and wrong half and half, held out the
 * proposer's answer and a counterpart of the other kind, its reward there being its balanced accuracy.
 * Attach with `--team proposer=MODEL_A,verifier=MODEL_B`; the runner sets OPENAI_*_PROPOSER / _VERIFIER.
 *
 * The prompts are exported so that the builtin team model's warm start (swarm/node/demo/sft-corpus.ts) is trained on
 * exactly what this agent sends. The script is copied alone when attached, so it imports nothing of its folder.
 */
import OpenAI from 'openai';
import { pathToFileURL } from 'node:url';

export interface TeamTask {
  id: string;
  question: string;
  expression: string;
  answer: number;
  split?: string;
}

export type Role = 'PROPOSER' | 'VERIFIER';

export const PROPOSER_PROMPT = 'Use calc.';
export const VERIFIER_PROMPT = 'Check the answer with calc. Say accept or reject.';

export const TOOLS: OpenAI.ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: {
      name: 'calc',
      // The calculator's own words: the builtin models' warm starts saw this tool as the calculator declares it, and
      // a tiny model given another description answers with noise.
      description: 'Evaluate arithmetic',
      parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
    },
  },
];

const MAX_TURNS = 3;

/** Two integers and one of + - * (nothing else is evaluated); null when `expr` is not one. */
function evaluate(expr: string): number | null {
  const m = /^\s*(-?\d+)\s*([+\-*])\s*(-?\d+)\s*$/.exec(expr);
  if (!m) return null;
  const a = Number(m[1]);
  const b = Number(m[3]);
  return m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b;
}

/**
 * The tool: an expression's value, or for a claim `N==EXPR` (either side first) whether it holds. A check is what
 * a verifier as small as the builtin models can follow: comparing two numbers digit by digit is beyond it.
 */
export function calc(expr: string): string {
  const sides = expr.split('==');
  if (sides.length === 1) return String(evaluate(expr) ?? 'error');
  if (sides.length !== 2) return 'error';
  const [claim, value] = /^\s*-?\d+\s*$/.test(sides[0]) ? [sides[0], evaluate(sides[1])] : [sides[1], evaluate(sides[0])];
  if (value === null || !/^\s*-?\d+\s*$/.test(claim)) return 'error';
  return String(Number(claim) === value);
}

/** The check a verifier makes of a proposal: `calc(checkExpression(...))` says whether it is right. */
export function checkExpression(proposal: string, task: Pick<TeamTask, 'expression'>): string {
  return `${task.expression}==${proposal}`;
}

/** Whether an answer (the last number of a reply, '' when it had none) is the task's. */
export function isRightAnswer(answer: string, task: Pick<TeamTask, 'answer'>): boolean {
  return answer !== '' && Number(answer) === task.answer;
}

/** An answer the verifier is asked to judge; `planted` when it is not the proposer's. */
export interface JudgedAnswer {
  answer: string;
  right: boolean;
  planted: boolean;
}

/**
 * The answers the verifier judges, each in a conversation of its own.
 *   training: one, right or wrong by a fair coin: the proposer's answer when it is of the side drawn, else the
 *     task's answer or a near miss (off by 1 to 10). Judging only the proposer's answers, the verifier saw mostly
 *     wrong ones before training and mostly right ones after, and accepting everything came to pay: in one 40-step
 *     run it drifted back to accepting 56% of wrong answers.
 *   held out: the proposer's answer (the team's success rests on its verdict) and its counterpart (the task's
 *     answer when the proposer's is wrong, a near miss when it is right), so that the verifier's held-out reward is
 *     its balanced accuracy, the same measure whatever share of the proposer's answers is right.
 */
export function answersToJudge(proposal: string, task: Pick<TeamTask, 'answer'>, kind: 'train' | 'eval', rand: () => number): JudgedAnswer[] {
  const own = { answer: proposal, right: isRightAnswer(proposal, task), planted: false };
  const rightOne = { answer: String(task.answer), right: true, planted: true };
  const nearMiss = () => {
    const offset = 1 + Math.floor(rand() * 10);
    return { answer: String(task.answer + (rand() < 0.5 ? -offset : offset)), right: false, planted: true };
  };
  if (kind === 'eval') return [own, own.right ? nearMiss() : rightOne];
  if (rand() < 0.5) return [own.right ? own : rightOne];
  return [own.right || proposal === '' ? nearMiss() : own];
}

function callExpression(argumentsJson: string): string {
  try {
    return String((JSON.parse(argumentsJson) as { expr?: unknown }).expr ?? '');
  } catch {
    return '';
  }
}

/** The last number of a reply ('' when it has none). */
export function lastNumber(text: string): string {
  const numbers = text.match(/-?\d+/g) ?? [];
  return numbers.length ? numbers[numbers.length - 1] : '';
}

/** The verifier's verdict read leniently: accept, reject, or none (which is never right). */
export function verdictOf(text: string): 'accept' | 'reject' | null {
  const t = text.toLowerCase();
  if (t.includes('reject')) return 'reject';
  if (t.includes('accept')) return 'accept';
  return null;
}

export function proposerMessages(task: Pick<TeamTask, 'question'>): OpenAI.ChatCompletionMessageParam[] {
  return [
    { role: 'system', content: PROPOSER_PROMPT },
    { role: 'user', content: task.question },
  ];
}

/**
 * The proposal comes first and the question last, as the proposer saw it: the tiny models copy into `calc` what
 * precedes the question's "?" at the end of the message, as the calculator taught them; the check `34*80==2720`
 * starts with that copy. (Asked "Is 34*80==2720?" or "What is 34*80==2720?", the tiny verifier's greedy checks were
 * right in 0 of 100 tries: it kept the operator and made up the numbers.)
 */
export function verifierMessages(task: Pick<TeamTask, 'question' | 'expression'>, proposal: string): OpenAI.ChatCompletionMessageParam[] {
  return [
    { role: 'system', content: VERIFIER_PROMPT },
    { role: 'user', content: `Answer ${proposal}. ${task.question}` },
  ];
}

/** One role's turn: tool calls answered with `calc` until it replies in words. */
async function converse(role: Role, messages: OpenAI.ChatCompletionMessageParam[]): Promise<string> {
  const openai = new OpenAI({ baseURL: process.env[`OPENAI_BASE_URL_${role}`], apiKey: process.env[`OPENAI_API_KEY_${role}`], maxRetries: 0 });
  const model = process.env[`AGENTJET_MODEL_${role}`]!;
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const completion = await openai.chat.completions.create({ model, messages, tools: TOOLS, max_tokens: 64 });
    const message = completion.choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) return message.content ?? '';
    for (const call of message.tool_calls) {
      if (call.type !== 'function') continue;
      messages.push({ role: 'tool', tool_call_id: call.id, content: calc(callExpression(call.function.arguments)) });
    }
  }
  return '';
}

async function main(): Promise<void> {
  const task = JSON.parse(process.env.AGENTJET_TASK!) as TeamTask;
  const kind = process.env.AGENTJET_EPISODE_KIND === 'eval' ? 'eval' : 'train';
  const proposal = lastNumber(await converse('PROPOSER', proposerMessages(task)));
  const judged = answersToJudge(proposal, task, kind, Math.random);
  const verdicts: ('accept' | 'reject' | null)[] = [];
  for (const { answer } of judged) verdicts.push(verdictOf(await converse('VERIFIER', verifierMessages(task, answer))));
  const correct = judged.filter((j, i) => verdicts[i] !== null && (verdicts[i] === 'accept') === j.right).length;
  const right = isRightAnswer(proposal, task);
  const ownVerdict = verdicts[judged.findIndex((j) => !j.planted)];
  // The acceptance rate of right and of wrong answers apart: a verifier that compares raises the first and lowers
  // the second; one that only learns to accept raises both.
  const acceptance = Object.fromEntries(judged.map((j, i) => [j.right ? 'accepted_if_right' : 'accepted_if_wrong', verdicts[i] === 'accept' ? 1 : 0]));
  console.log(
    JSON.stringify({
      rewards: { proposer: right ? 1 : 0, verifier: correct / judged.length },
      success: right && ownVerdict === 'accept',
      metrics: {
        proposer_right: right ? 1 : 0,
        verifier_right: correct / judged.length,
        accepted: ownVerdict === 'accept' ? 1 : 0,
        ...acceptance,
        ...(kind === 'train' ? { planted: judged[0].planted ? 1 : 0 } : {}),
      },
    }),
  );
}

// Run only as a script: the warm start imports the prompts above.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
