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
import { CALC_TOOL, type CalcTask, firstMessages } from './calc-format.ts';

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

export async function probeCalculator(engine: TrainerEngine, tasks: CalcTask[], temperature: number, seed = 1): Promise<ProbeResult> {
  const { tokenizer, template } = builtinTokenizerBundle();
  const turn = async (messages: ChatMessage[], i: number) => {
    const promptIds = tokenizer.encode(template.render(messages, { tools: [CALC_TOOL], addGenerationPrompt: true }));
    const result = await engine.generate({
      promptIds,
      sampling: { maxTokens: 64, temperature, topP: 1, topK: 0, seed: seed * 100_003 + i, stopTokenIds: [IM_END_ID], stopStrings: [], topLogprobs: 0 },
    });
    const text = tokenizer.decode(result.tokens.map((t) => t.id).filter((id) => id !== IM_END_ID));
    return parseAssistantOutput(text, 'hermes', { newToolCallId: () => 'call_0' });
  };
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
