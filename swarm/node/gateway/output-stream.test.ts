import { describe, expect, it } from 'vitest';
import { OutputStream, type OutputEvent } from './output-stream.ts';

function run(pieces: string[], options: { parseToolCalls?: boolean; stopStrings?: string[] } = {}) {
  let next = 0;
  const stream = new OutputStream({ parseToolCalls: options.parseToolCalls ?? true, stopStrings: options.stopStrings ?? [], newToolCallId: () => `call_${next++}` });
  const events: OutputEvent[] = [];
  for (const piece of pieces) events.push(...stream.push(piece));
  events.push(...stream.finish());
  return { events, text: stream.text, stopped: stream.stopped };
}

/** Every way to cut `text` into single characters: the hardest case for held-back markers. */
const chars = (text: string) => [...text];

const content = (events: OutputEvent[]) => events.filter((e) => e.type === 'content').map((e) => (e as { text: string }).text).join('');
const calls = (events: OutputEvent[]) => events.flatMap((e) => (e.type === 'tool_call' ? [e.call] : []));

describe('OutputStream', () => {
  const hermes = 'Let me look.\n<tool_call>\n{"name": "search", "arguments": {"q": "tiny <models>"}}\n</tool_call>';

  it('parses a Hermes tool call arriving one character at a time, and never shows the tag', () => {
    const { events } = run(chars(hermes));
    expect(calls(events)).toEqual([{ id: 'call_0', type: 'function', function: { name: 'search', arguments: '{"q":"tiny <models>"}' } }]);
    expect(content(events)).toBe('Let me look.\n');
    expect(events.some((e) => e.type === 'content' && e.text.includes('<tool'))).toBe(false);
  });

  it('gives the same result for one piece and for many', () => {
    const whole = run([hermes + '\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>']);
    const cut = run(chars(hermes + '\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>'));
    expect(calls(cut.events)).toEqual(calls(whole.events));
    expect(calls(whole.events).map((c) => c.function.name)).toEqual(['search', 'b']);
    expect(content(cut.events)).toBe(content(whole.events));
  });

  it('parses a block left open when generation stopped', () => {
    const { events } = run(chars('<tool_call>\n{"name": "f", "arguments": {"x": 1}}'));
    expect(calls(events).map((c) => c.function)).toEqual([{ name: 'f', arguments: '{"x":1}' }]);
  });

  it('passes a block that is not JSON on as content', () => {
    const { events } = run(chars('<tool_call>not json</tool_call>'));
    expect(calls(events)).toEqual([]);
    expect(content(events)).toBe('<tool_call>not json</tool_call>');
  });

  it('leaves tags alone when tools are off', () => {
    const { events } = run(chars(hermes), { parseToolCalls: false });
    expect(calls(events)).toEqual([]);
    expect(content(events)).toBe(hermes);
  });

  it('cuts the output before the first stop string, even when it arrives in pieces', () => {
    const result = run(['hello wo', 'rl', 'd END', ' more'], { stopStrings: ['END', 'never'] });
    expect(content(result.events)).toBe('hello world ');
    expect(result.text).toBe('hello world ');
    expect(result.stopped).toBe(true);
  });

  it('shows text that only looked like the start of a marker', () => {
    const { events } = run(chars('a <b> <tool and <|x'), { stopStrings: ['<|end|>'] });
    expect(content(events)).toBe('a <b> <tool and <|x');
  });

  it('routes a leading think block to reasoning', () => {
    const { events } = run(chars('<think>plan it</think>\n\nanswer'));
    expect(events.filter((e) => e.type === 'reasoning').map((e) => (e as { text: string }).text).join('')).toBe('plan it');
    expect(content(events)).toBe('answer');
  });
});
