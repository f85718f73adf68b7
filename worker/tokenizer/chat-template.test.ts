import { describe, expect, it } from 'vitest';
import { ByteTokenizer, IM_START_ID, TOOL_CALL_START_ID, TOOL_RESPONSE_START_ID } from './byte-tokenizer.ts';
import { BuiltinChatTemplate, JinjaChatTemplate, toPythonStyleJson } from './chat-template.ts';
import { toolConversation, weatherTool } from './test-fixtures.ts';
import type { ToolSpec } from './types.ts';

describe('BuiltinChatTemplate', () => {
  const template = new BuiltinChatTemplate();

  it('renders system, tools, assistant tool calls and grouped tool results in ChatML with Hermes tags', () => {
    const prompt = template.render(toolConversation, { tools: [weatherTool], addGenerationPrompt: true });
    expect(prompt.startsWith('<|im_start|>system\nYou are terse.\n\n# Tools\nget_weather(city?: string): Current weather<|im_end|>\n')).toBe(true);
    expect(prompt).toContain('<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n');
    expect(prompt).toContain(
      '<|im_start|>assistant\nChecking both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n',
    );
    expect(
      prompt.endsWith(
        '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response>\n<tool_response>\n{"temp": 25}\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
      ),
    ).toBe(true);
  });

  it('renders a plain conversation without a tools section, and no generation prompt unless asked', () => {
    const prompt = new BuiltinChatTemplate().render(
      [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello' },
      ],
      { addGenerationPrompt: false },
    );
    expect(prompt).toBe(
      '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n',
    );
  });

  it('produces prompts whose markers the byte tokenizer reads as single special tokens', () => {
    const ids = new ByteTokenizer().encode(
      template.render(toolConversation, { tools: [weatherTool], addGenerationPrompt: true }),
    );
    expect(ids[0]).toBe(IM_START_ID);
    expect(ids.filter((id) => id === TOOL_CALL_START_ID)).toHaveLength(2);
    expect(ids.filter((id) => id === TOOL_RESPONSE_START_ID)).toHaveLength(2);
  });
});

describe('JinjaChatTemplate', () => {
  it('passes messages, tools and the generation flag to the template', () => {
    const template = new JinjaChatTemplate({
      template:
        '{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if tools %}T{{ tools|length }}{% endif %}{% if add_generation_prompt %}>{% endif %}{{ eos_token }}',
      eosToken: '</s>',
    });
    expect(template.toolCallFormat).toBe('none');
    expect(
      template.render(
        [
          { role: 'user', content: 'x' },
          { role: 'assistant', content: null },
        ],
        { tools: [weatherTool], addGenerationPrompt: true },
      ),
    ).toBe('[user:x][assistant:]T1></s>');
  });

  it('renders tools whose optional fields are undefined', () => {
    const template = new JinjaChatTemplate({ template: '{% for t in tools %}{{ t | tojson }}{% endfor %}' });
    const tool: ToolSpec = { type: 'function', function: { name: 'f', description: undefined } };
    expect(template.render([], { tools: [tool], addGenerationPrompt: false })).toBe(
      '{"type": "function", "function": {"name": "f"}}',
    );
  });

  it('reports a template that does not compile or fails while rendering as ChatTemplateError', () => {
    expect(() => new JinjaChatTemplate({ template: '{% for %}' })).toThrow(
      expect.objectContaining({ name: 'ChatTemplateError' }),
    );
    const raising = new JinjaChatTemplate({ template: "{{ raise_exception('no system role') }}" });
    expect(() => raising.render([], { addGenerationPrompt: false })).toThrow(
      expect.objectContaining({ name: 'ChatTemplateError' }),
    );
  });
});

describe('toPythonStyleJson', () => {
  it("writes JSON with Python's separators and no ASCII escaping", () => {
    expect(toPythonStyleJson({ a: [1, 'é'], b: { c: null }, d: undefined })).toBe(
      '{"a": [1, "é"], "b": {"c": null}}',
    );
  });
});
