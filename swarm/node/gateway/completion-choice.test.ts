/**
 * The gateway's output path with the builtin byte tokenizer: token ids as a sampler emits them (including the
 * special `<tool_call>` ids and multi-byte characters split across tokens) become OpenAI's message and finish reason.
 */
import { describe, expect, it } from 'vitest';
import type { GenerateResult, GeneratedToken } from '../../../worker/common/engine.ts';
import { ByteTokenizer, IM_END_ID } from '../../../worker/tokenizer/byte-tokenizer.ts';
import { CompletionChoice } from './completion-choice.ts';
import type { OutputEvent } from './output-stream.ts';

const tokenizer = new ByteTokenizer();

function choice(options: { parseToolCalls?: boolean; forcedPrefix?: string; stopStrings?: string[] } = {}) {
  return new CompletionChoice({
    index: 0,
    tokenizer,
    stopTokenIds: tokenizer.eosTokenIds,
    stopStrings: options.stopStrings ?? [],
    parseToolCalls: options.parseToolCalls ?? true,
    forcedPrefix: options.forcedPrefix ?? '',
    wantLogprobs: true,
  });
}

function feed(c: CompletionChoice, ids: number[]): OutputEvent[] {
  const events = c.start();
  for (const id of ids) events.push(...c.push({ id, logprob: -0.5 } satisfies GeneratedToken));
  events.push(...c.finish());
  return events;
}

const result = (finishReason: GenerateResult['finishReason']): GenerateResult => ({
  tokens: [],
  finishReason,
  policyVersion: 3,
  timings: { queuedMs: 0, prefillMs: 0, decodeMs: 0 },
});

describe('CompletionChoice', () => {
  it('turns a generated Hermes block into tool_calls and finish_reason tool_calls', () => {
    const c = choice();
    const ids = [...tokenizer.encode('Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>'), IM_END_ID];
    const events = feed(c, ids);
    const message = c.message();
    expect(message.content).toBe('Checking.\n');
    expect(message.tool_calls?.map((t) => t.function)).toEqual([{ name: 'get_weather', arguments: '{"city":"Zürich"}' }]);
    expect(c.finishReason(result('stop'))).toBe('tool_calls');
    expect(events.filter((e) => e.type === 'tool_call')).toHaveLength(1);
    // Every token is kept for training, the end-of-turn token included; only visible tokens get logprobs.
    expect(c.tokens.map((t) => t.id)).toEqual(ids);
    expect(c.logprobs()!.content).toHaveLength(ids.length - 1);
  });

  it('streams exactly the recorded message: content as generated, the think block without its framing newlines', () => {
    const streamed = (events: OutputEvent[], type: 'content' | 'reasoning') =>
      events.map((e) => (e.type === type ? e.text : '')).join('');
    const blank = choice();
    const blankEvents = feed(blank, [...tokenizer.encode('\n \n'), IM_END_ID]);
    expect(blank.message().content).toBe('\n \n');
    expect(streamed(blankEvents, 'content')).toBe('\n \n');
    const thinking = choice();
    const events = feed(thinking, [...tokenizer.encode('<think>\n plan  it \n</think>\n\nanswer '), IM_END_ID]);
    expect(thinking.message()).toMatchObject({ content: 'answer ', reasoning_content: 'plan  it' });
    expect(streamed(events, 'reasoning')).toBe('plan  it');
    expect(streamed(events, 'content')).toBe('answer ');
  });

  it('keeps a forced call cut by the length limit a tool call (its arguments as generated), never text with tags', () => {
    const c = choice({ forcedPrefix: '<tool_call>\n{"name": "calc", "arguments": ' });
    const events = feed(c, tokenizer.encode('{"expr": "5'));
    expect(events.filter((e) => e.type === 'content')).toEqual([]);
    expect(c.message()).toMatchObject({ content: null, tool_calls: [{ function: { name: 'calc', arguments: '{"expr": "5' } }] });
    expect(c.finishReason(result('length'))).toBe('length');
    // Unforced, an unclosed block stays text, as the non-streaming parser leaves it.
    const free = choice();
    feed(free, tokenizer.encode('<tool_call>\n{"name": "calc", "arguments": {"expr'));
    expect(free.message().tool_calls).toBeUndefined();
  });

  it('completes a forced tool-call opening (tool_choice naming a function)', () => {
    const c = choice({ forcedPrefix: '<tool_call>\n{"name": "lookup", "arguments": ' });
    feed(c, [...tokenizer.encode('{"q": "x"}}\n</tool_call>'), IM_END_ID]);
    expect(c.message().tool_calls?.[0].function).toEqual({ name: 'lookup', arguments: '{"q":"x"}' });
    expect(c.message().content).toBeNull();
  });

  it('reports length when max tokens cut a plain answer, stop otherwise', () => {
    const cut = choice();
    feed(cut, tokenizer.encode('unfinished'));
    expect(cut.finishReason(result('length'))).toBe('length');
    const stopped = choice({ stopStrings: ['fin'] });
    feed(stopped, tokenizer.encode('unfinished'));
    expect(stopped.message().content).toBe('un');
    expect(stopped.finishReason(result('length'))).toBe('stop');
  });

  it('shows multi-byte characters whole, even when their bytes arrive as separate tokens', () => {
    const c = choice({ parseToolCalls: false });
    const events = feed(c, tokenizer.encode('Grüße 🚀'));
    expect(events.every((e) => e.type !== 'content' || !e.text.includes('\uFFFD'))).toBe(true);
    expect(c.message().content).toBe('Grüße 🚀');
  });

  it('returns a think block as reasoning_content, also when the prompt opened it (a thinking template)', () => {
    const generated = choice();
    feed(generated, [...tokenizer.encode('<think>\nadd them\n</think>\n\n5'), IM_END_ID]);
    expect(generated.message()).toMatchObject({ content: '5', reasoning_content: 'add them' });
    const opened = choice({ forcedPrefix: '<think>' });
    feed(opened, [...tokenizer.encode('\nadd them\n</think>\n\n5'), IM_END_ID]);
    expect(opened.message()).toMatchObject({ content: '5', reasoning_content: 'add them' });
    expect(opened.takeTokenIds()).toEqual(opened.tokens.map((t) => t.id));
    expect(opened.takeTokenIds()).toEqual([]);
  });
});
