import { describe, expect, it } from 'vitest';
import { parseAssistantOutput, randomToolCallId } from './tool-calls.ts';

function sequentialIds() {
  let n = 0;
  return () => `call_${++n}`;
}

describe('parseAssistantOutput (hermes)', () => {
  it('extracts one tool call and strips it from the content', () => {
    const text =
      'Let me look that up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    expect(parseAssistantOutput(text, 'hermes', { newToolCallId: sequentialIds() })).toEqual({
      content: 'Let me look that up.',
      toolCalls: [
        { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      ],
      malformed: [],
    });
  });

  it('extracts several calls in order, and keeps string arguments as they are', () => {
    const text =
      '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": "{\\"x\\": 1}"}\n</tool_call>';
    const parsed = parseAssistantOutput(text, 'hermes', { newToolCallId: sequentialIds() });
    expect(parsed.content).toBe('');
    expect(parsed.toolCalls.map((c) => [c.id, c.function.name, c.function.arguments])).toEqual([
      ['call_1', 'a', '{}'],
      ['call_2', 'b', '{"x": 1}'],
    ]);
  });

  it('leaves malformed blocks in the content and lists them', () => {
    const broken = '<tool_call>\n{"name": "a", "arguments": {"x": }\n</tool_call>';
    const text = `Trying.\n${broken}\n<tool_call>\n{"name": "ok", "arguments": {"y": 2}}\n</tool_call>`;
    const parsed = parseAssistantOutput(text, 'hermes', { newToolCallId: sequentialIds() });
    expect(parsed.malformed).toEqual([broken]);
    expect(parsed.content).toBe(`Trying.\n${broken}`);
    expect(parsed.toolCalls).toHaveLength(1);
    expect(parsed.toolCalls[0].function).toEqual({ name: 'ok', arguments: '{"y":2}' });
  });

  it('treats a call without a name as malformed', () => {
    const parsed = parseAssistantOutput('<tool_call>{"arguments": {}}</tool_call>', 'hermes');
    expect(parsed.toolCalls).toEqual([]);
    expect(parsed.malformed).toHaveLength(1);
  });

  it('accepts a last block whose closing tag never came (generation stopped at eos)', () => {
    const parsed = parseAssistantOutput('<tool_call>\n{"name": "a", "arguments": {"q": 1}}\n', 'hermes', {
      newToolCallId: sequentialIds(),
    });
    expect(parsed.toolCalls.map((c) => c.function.name)).toEqual(['a']);
    expect(parsed.content).toBe('');
  });

  it('moves a leading think block into reasoning', () => {
    const text =
      '<think>\nThe user wants weather.\n</think>\n\nChecking.\n<tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>';
    const parsed = parseAssistantOutput(text, 'hermes', { newToolCallId: sequentialIds() });
    expect(parsed.reasoning).toBe('The user wants weather.');
    expect(parsed.content).toBe('Checking.');
    expect(parsed.toolCalls).toHaveLength(1);
  });

  it('reads reasoning when the prompt pre-filled <think> and only </think> was generated', () => {
    expect(parseAssistantOutput('planning...\n</think>\n\nDone.', 'hermes')).toMatchObject({
      reasoning: 'planning...',
      content: 'Done.',
    });
  });

  it('does not treat a think tag after other text as reasoning', () => {
    const parsed = parseAssistantOutput('Answer <think>x</think> more', 'hermes');
    expect(parsed.reasoning).toBeUndefined();
    expect(parsed.content).toBe('Answer <think>x</think> more');
  });

  it("leaves tool-call text alone with format 'none'", () => {
    const text = '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>';
    expect(parseAssistantOutput(text, 'none')).toEqual({ content: text, toolCalls: [], malformed: [] });
  });

  it('makes distinct call ids by default', () => {
    const a = randomToolCallId();
    expect(a).toMatch(/^call_[A-Za-z0-9]{24}$/);
    expect(randomToolCallId()).not.toBe(a);
  });
});
