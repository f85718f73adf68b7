/**
 * What a warm start has learned, measured without the gateway: the calculator conversation played directly against
 * an engine (the agent's loop in examples/calculator/agent.ts, one tool round at most, graded by its reward.ts), with the shares of turns that
 * call the tool, copy the expression correctly, and end with the right answer. `npm run pretrain:tiny` prints it
 * and records it in the checkpoint's training.json.
 */
import type { TrainerEngine } from '../../../worker/common/engine.ts';
import { IM_END_ID } from '../../../worker/tokenizer/byte-tokenizer.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { parseAssistantOutput } from '../../../worker/tokenizer/tool-calls.ts';
import type { ChatMessage } from '../../../worker/tokenizer/types.ts';
import { calc, callExpression } from '../../../examples/calculator/agent.ts';
import grade from '../../../examples/calculator/reward.ts';
import { calc as teamCalc, checkExpression, verdictOf, verifierMessages } from '../../../examples/proposer-verifier/agent.ts';
import { CALC_TOOL, type CalcTask, firstMessages, rng } from './calc-format.ts';
import { type GuessTask, playGuess } from './guess-format.ts';

/** The example's own grader, on the final answer's text: the probe scores exactly as the demo does. */
const rewardFor = (task: CalcTask, answer: string) => grade({ task, output: { answer } }).reward;

export interface ProbeResult {
  tasks: number;
  /** Share of first turns that call the tool. */
  toolRate: number;
  /** Of the tool calls: share whose `expr` is the task's expression. */
  exprCopied: number;
  /** Share of episodes ending with the right answer, over all, after a tool call, and answering directly. */
  success: number;
  toolSuccess: number;
  directSuccess: number;
}

/** One assistant turn from the engine, rendered and decoded as the gateway does (up to `maxTokens`). */
async function engineTurn(engine: TrainerEngine, messages: ChatMessage[], options: { tools?: typeof CALC_TOOL[]; temperature: number; seed: number; maxTokens: number }): Promise<string> {
  const { tokenizer, template } = builtinTokenizerBundle();
  const promptIds = tokenizer.encode(template.render(messages, { ...(options.tools ? { tools: options.tools } : {}), addGenerationPrompt: true }));
  const result = await engine.generate({
    promptIds,
    sampling: { maxTokens: options.maxTokens, temperature: options.temperature, topP: 1, topK: 0, seed: options.seed, stopTokenIds: [IM_END_ID], stopStrings: [], topLogprobs: 0 },
  });
  return tokenizer.decode(result.tokens.map((t) => t.id).filter((id) => id !== IM_END_ID));
}

/** One turn of a conversation that declares the calculator's tool, parsed as the gateway parses it (up to 64 tokens). */
async function calculatorTurn(engine: TrainerEngine, messages: ChatMessage[], temperature: number, seed: number) {
  const text = await engineTurn(engine, messages, { tools: [CALC_TOOL], temperature, seed, maxTokens: 64 });
  return parseAssistantOutput(text, 'hermes', { newToolCallId: () => 'call_0' });
}

export async function probeCalculator(engine: TrainerEngine, tasks: CalcTask[], temperature: number, seed = 1): Promise<ProbeResult> {
  const turn = (messages: ChatMessage[], i: number) => calculatorTurn(engine, messages, temperature, seed * 100_003 + i);
  const outcomes = await Promise.all(
    tasks.map(async (task, i) => {
      const messages = firstMessages(task);
      const first = await turn(messages, i);
      const call = first.toolCalls[0];
      if (!call) return { tool: false, copied: false, reward: rewardFor(task, first.content) };
      const expr = callExpression(call.function.arguments);
      messages.push({ role: 'assistant', content: first.content, tool_calls: [call] });
      messages.push({ role: 'tool', tool_call_id: call.id, content: calc(expr) });
      const second = await turn(messages, i + tasks.length);
      return { tool: true, copied: expr === task.expression, reward: second.toolCalls.length ? 0 : rewardFor(task, second.content) };
    }),
  );
  const share = (xs: boolean[]) => (xs.length ? xs.filter(Boolean).length / xs.length : 0);
  const viaTool = outcomes.filter((o) => o.tool);
  const direct = outcomes.filter((o) => !o.tool);
  return {
    tasks: tasks.length,
    toolRate: viaTool.length / outcomes.length,
    exprCopied: share(viaTool.map((o) => o.copied)),
    success: share(outcomes.map((o) => o.reward === 1)),
    toolSuccess: share(viaTool.map((o) => o.reward === 1)),
    directSuccess: share(direct.map((o) => o.reward === 1)),
  };
}

export function formatProbe(label: string, p: ProbeResult): string {
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
  return `${label}: success ${pct(p.success)} · tool calls ${pct(p.toolRate)} (expr copied ${pct(p.exprCopied)}, right ${pct(p.toolSuccess)}) · direct right ${pct(p.directSuccess)} · ${p.tasks} held-out tasks`;
}

export interface GuessProbeResult {
  tasks: number;
  /** Share of games that found the secret within the moves. */
  success: number;
  /** Share of guesses inside the range still possible. */
  inRange: number;
  /** Share of guesses that halve the range (the middle number, either one when the count is even). */
  halving: number;
  meanReward: number;
}

/** Guess the number played directly against the engine (the agent's rules, guess-format.ts). */
export async function probeGuess(engine: TrainerEngine, tasks: GuessTask[], temperature: number, seed = 1): Promise<GuessProbeResult> {
  let guesses = 0;
  let inRange = 0;
  let halving = 0;
  const games = await Promise.all(
    tasks.map((task, i) =>
      playGuess(task, async (messages, state) => {
        const reply = await engineTurn(engine, messages, { temperature, seed: seed * 100_003 + i * 16 + state.used, maxTokens: 8 });
        const guess = Number(reply.match(/\d+/)?.[0] ?? NaN);
        guesses++;
        if (guess >= state.low && guess <= state.high) inRange++;
        if (guess === Math.floor((state.low + state.high) / 2) || guess === Math.ceil((state.low + state.high) / 2)) halving++;
        return reply;
      }),
    ),
  );
  return {
    tasks: tasks.length,
    success: games.filter((g) => g.state.found).length / Math.max(1, games.length),
    inRange: inRange / Math.max(1, guesses),
    halving: halving / Math.max(1, guesses),
    meanReward: games.reduce((a, g) => a + g.reward, 0) / Math.max(1, games.length),
  };
}

export function formatGuessProbe(label: string, p: GuessProbeResult): string {
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
  return `${label}: success ${pct(p.success)} · guesses in range ${pct(p.inRange)} · halving ${pct(p.halving)} · reward ${p.meanReward.toFixed(2)} · ${p.tasks} games`;
}

export interface VerifierProbeResult {
  tasks: number;
  /** Share of first turns that check with the tool. */
  checkRate: number;
  /** Of the checks: the share that is the proposal's check (checkExpression), the copy the verdict rests on. */
  checkCopied: number;
  /** Of the checks answered true or false: the share of verdicts that follow the tool. */
  followed: number;
  /** The share of right, and of wrong, proposals accepted. */
  acceptedIfRight: number;
  acceptedIfWrong: number;
}

/**
 * The team's verifier on half-right proposals (the wrong ones 1 to 10 above the answer; the warm start's are above
 * or below), scored as the team agent scores it.
 */
export async function probeVerifier(engine: TrainerEngine, tasks: CalcTask[], temperature: number, seed = 1): Promise<VerifierProbeResult> {
  const rand = rng(seed);
  const turn = (messages: ChatMessage[], i: number) => calculatorTurn(engine, messages, temperature, seed * 100_003 + i);
  const outcomes = await Promise.all(
    tasks.map(async (task, i) => {
      const right = rand() < 0.5;
      const proposal = String(right ? task.answer : task.answer + 1 + Math.floor(rand() * 10));
      const messages = verifierMessages(task, proposal) as ChatMessage[];
      const first = await turn(messages, i);
      const call = first.toolCalls[0];
      if (!call) return { right, checked: false, copied: false, result: '', verdict: verdictOf(first.content) };
      const expr = callExpression(call.function.arguments);
      const result = teamCalc(expr);
      messages.push({ role: 'assistant', content: first.content, tool_calls: [call] });
      messages.push({ role: 'tool', tool_call_id: call.id, content: result });
      const second = await turn(messages, i + tasks.length);
      return { right, checked: true, copied: expr === checkExpression(proposal, task), result, verdict: second.toolCalls.length ? null : verdictOf(second.content) };
    }),
  );
  const share = (xs: boolean[]) => (xs.length ? xs.filter(Boolean).length / xs.length : 0);
  const checks = outcomes.filter((o) => o.checked);
  const answered = checks.filter((o) => o.result === 'true' || o.result === 'false');
  return {
    tasks: tasks.length,
    checkRate: share(outcomes.map((o) => o.checked)),
    checkCopied: share(checks.map((o) => o.copied)),
    followed: share(answered.map((o) => (o.verdict === 'accept') === (o.result === 'true'))),
    acceptedIfRight: share(outcomes.filter((o) => o.right).map((o) => o.verdict === 'accept')),
    acceptedIfWrong: share(outcomes.filter((o) => !o.right).map((o) => o.verdict === 'accept')),
  };
}

export function formatVerifierProbe(label: string, p: VerifierProbeResult): string {
  const pct = (x: number) => `${Math.round(x * 100)}%`;
  return `${label}: checks ${pct(p.checkRate)} (copied ${pct(p.checkCopied)}, verdict follows ${pct(p.followed)}) · accepts ${pct(p.acceptedIfRight)} of right, ${pct(p.acceptedIfWrong)} of wrong · ${p.tasks} held-out tasks`;
}
