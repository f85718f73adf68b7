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
import { calc, checkExpression, verifierMessages } from '../../../examples/proposer-verifier/agent.ts';

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

/** A proposal for a team task: right, or off by 1 to 10. */
function proposalFor(task: CalcTask, rand: () => number, rightShare: number): { proposal: number; right: boolean } {
  const right = rand() < rightShare;
  const offset = 1 + Math.floor(rand() * 10);
  return { proposal: right ? task.answer : task.answer + (rand() < 0.5 ? -offset : offset), right };
}

/**
 * The verifier's part of a team episode: a proposal (right in `rightShare` of them, else off by a little), the
 * verifier's check of it with `calc` (`34*80==2600`) and the tool's true or false, then a verdict that follows the
 * check in `followShare` of them. A warm start that always checks and mostly follows: RL has to make it follow (and
 * copy its checks rightly: a miscopied check says false of a right proposal).
 */
export function verifierDemonstration(task: CalcTask, rand: () => number, rightShare: number, followShare: number): ChatMessage[] {
  const { proposal, right } = proposalFor(task, rand, rightShare);
  const messages = verifierMessages(task, String(proposal)) as ChatMessage[];
  const expr = checkExpression(String(proposal), task);
  const callId = 'call_0';
  messages.push({ role: 'assistant', content: '', tool_calls: [{ id: callId, type: 'function', function: { name: CALC_TOOL.function.name, arguments: JSON.stringify({ expr }) } }] });
  messages.push({ role: 'tool', content: calc(expr), tool_call_id: callId });
  const accept = rand() < followShare ? right : !right;
  messages.push({ role: 'assistant', content: accept ? 'accept' : 'reject' });
  return messages;
}

/**
 * The turns builtin:tiny-team (the proposer's warm start) was trained on, kept so that it is rebuilt as shipped: a
 * proposal in a short-prompt message, `calc` on the question's expression and its value, and a verdict. They taught
 * the tiny model the short prompt's tool call, which is the proposer's; the verifier now checks instead
 * (verifierDemonstration).
 */
export function recomputeDemonstration(task: CalcTask, rand: () => number, rightShare: number, verdictAccuracy: number): ChatMessage[] {
  const { proposal, right } = proposalFor(task, rand, rightShare);
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Check with calc. Say accept or reject.' },
    { role: 'user', content: `Answer ${proposal}. ${task.question}` },
  ];
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
