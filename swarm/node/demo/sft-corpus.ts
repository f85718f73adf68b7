/**
 * The warm-start corpus for the builtin tiny model: calculator conversations rendered with the builtin ChatML
 * template, exactly as the gateway renders the example agent's requests. Most demonstrations answer from the
 * model's own arithmetic and some call the `calc` tool, so the warm-started policy knows both ways and RL has
 * something to choose between (tool calls are right far more often).
 */
import type { TrainSample } from '../../../worker/common/engine.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import type { ChatMessage, ToolSpec } from '../../../worker/tokenizer/types.ts';
import { CALC_TOOL, type CalcTask, firstMessages } from './calc-format.ts';
import { type GuessTask, playGuess } from './guess-format.ts';
import { verifierMessages } from '../../../examples/proposer-verifier/agent.ts';

const IM_END = '<|im_end|>';

/** A demonstration: the tool path (call, result, answer) or the direct path (answer at once). */
export function demonstration(task: CalcTask, useTool: boolean): ChatMessage[] {
  const messages = firstMessages(task);
  if (useTool) {
    const callId = 'call_0';
    messages.push({ role: 'assistant', content: '', tool_calls: [{ id: callId, type: 'function', function: { name: CALC_TOOL.function.name, arguments: JSON.stringify({ expr: task.expression }) } }] });
    messages.push({ role: 'tool', content: String(task.answer), tool_call_id: callId });
  }
  messages.push({ role: 'assistant', content: String(task.answer) });
  return messages;
}

/**
 * A copy drill: a short user turn ending in the expression, answered with the expression itself. Copying a few
 * characters from ~60 positions back is what a freshly initialised tiny model learns slowest (attention starts
 * out spread over the whole row); from a dozen positions back it learns it within a hundred steps, and the
 * heads that do it then serve the long rows too. The random letters in front vary the distance, so that the
 * drill teaches copying by content, not from one fixed offset.
 */
export function copyDrill(task: CalcTask, rand: () => number): ChatMessage[] {
  const letters = Array.from({ length: Math.floor(rand() * 24) }, () => 'abcdefghijklmnopqrstuvwxyz '[Math.floor(rand() * 27)]).join('');
  return [
    { role: 'user', content: `${letters}${task.expression}` },
    { role: 'assistant', content: task.expression },
  ];
}

/**
 * A game of guess the number played by a policy that searches blindly: each guess is anywhere in the range still
 * possible, or, with probability `strayShare`, anywhere from 1 to max. The warm-started model so reads the
 * environment's answers and stays mostly in range; halving the range is what RL has to find.
 */
export async function guessDemonstration(task: GuessTask, rand: () => number, strayShare: number): Promise<ChatMessage[]> {
  const pick = (low: number, high: number) => low + Math.floor(rand() * (high - low + 1));
  const game = await playGuess(task, (_, state) => String(rand() < strayShare ? pick(1, task.max) : pick(state.low, state.high)));
  return game.messages;
}

/**
 * The verifier's part of a team episode: a proposal (right in `rightShare` of them, else off by a little), the
 * verifier's `calc` call on the task's expression and the tool's result, then a verdict that is right in
 * `verdictAccuracy` of them. A warm start that compares sometimes and guesses otherwise: RL has to make it compare.
 */
export function verifierDemonstration(task: CalcTask, rand: () => number, rightShare: number, verdictAccuracy: number): ChatMessage[] {
  const right = rand() < rightShare;
  const offset = 1 + Math.floor(rand() * 10);
  const proposal = right ? task.answer : task.answer + (rand() < 0.5 ? -offset : offset);
  const messages = verifierMessages(task, String(proposal)) as ChatMessage[];
  const callId = 'call_0';
  messages.push({ role: 'assistant', content: '', tool_calls: [{ id: callId, type: 'function', function: { name: CALC_TOOL.function.name, arguments: JSON.stringify({ expr: task.expression }) } }] });
  messages.push({ role: 'tool', content: String(task.answer), tool_call_id: callId });
  const accept = rand() < verdictAccuracy ? right : !right;
  messages.push({ role: 'assistant', content: accept ? 'accept' : 'reject' });
  return messages;
}

/**
 * Token ids of a conversation (declaring `tools`: the calculator's, or none for drills and games) with lossMask = 1 on every assistant turn, through its <|im_end|> (the newline the
 * template writes after it comes with the next prompt, as in a served episode).
 */
export function sftSample(messages: ChatMessage[], tools: ToolSpec[] | undefined): TrainSample {
  const { tokenizer, template } = builtinTokenizerBundle();
  const render = (upTo: number, addGenerationPrompt: boolean) => template.render(messages.slice(0, upTo), { tools, addGenerationPrompt });
  const tokens: number[] = [];
  const lossMask: number[] = [];
  let covered = '';
  messages.forEach((message, i) => {
    if (message.role !== 'assistant') return;
    const prompt = render(i, true);
    const withTurn = render(i + 1, false);
    const context = tokenizer.encode(prompt.slice(covered.length));
    let turn = withTurn.slice(prompt.length);
    turn = turn.slice(0, turn.lastIndexOf(IM_END) + IM_END.length);
    const generated = tokenizer.encode(turn);
    tokens.push(...context, ...generated);
    lossMask.push(...context.map(() => 0), ...generated.map(() => 1));
    covered = prompt + turn;
  });
  return { tokens, lossMask, advantages: tokens.map(() => 0), oldLogprobs: tokens.map(() => 0) };
}
