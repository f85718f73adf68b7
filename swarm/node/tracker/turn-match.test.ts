import { describe, expect, it } from 'vitest';
import { locateTurn } from './turn-match.ts';

const generated =
  '<think>\nLook up.\n</think>\n\nChecking.\n<tool_call>\n{"name": "search", "arguments": {"q": "Lima", "n": 2}}\n</tool_call><|im_end|>';

function rendered(turn: string): string {
  return `<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n${turn}\n<|im_start|>user\n<tool_response>\n19\n</tool_response><|im_end|>\n`;
}

describe('locateTurn', () => {
  it('finds a turn rendered exactly as generated', () => {
    const text = rendered(generated);
    expect(locateTurn(text, 0, generated, 'hermes')).toEqual({
      start: text.indexOf('<think>'),
      end: text.indexOf('<|im_end|>\n<|im_start|>user\n<tool') + 10,
      normalized: false,
    });
  });

  it('tolerates re-serialized tool-call arguments and whitespace around tool-call tags', () => {
    const compact =
      '<think>\nLook up.\n</think>\n\nChecking.\n\n<tool_call>\n{"name": "search", "arguments": {"n":2,"q":"Lima"}}\n</tool_call><|im_end|>';
    const text = rendered(compact);
    expect(locateTurn(text, 0, generated, 'hermes')).toMatchObject({
      start: text.indexOf('<think>'),
      normalized: true,
    });
    expect(locateTurn(text, 0, generated, 'none')).toBeNull();
  });

  it('refuses turns whose meaning differs', () => {
    const otherArguments = generated.replace('"Lima"', '"Quito"');
    const otherReasoning = generated.replace('Look up.', 'Think.');
    const withoutReasoning = generated.replace('<think>\nLook up.\n</think>\n\n', '');
    const otherEnd = generated.replace('<|im_end|>', '<|endoftext|>');
    for (const turn of [otherArguments, otherReasoning, withoutReasoning, otherEnd]) {
      expect(locateTurn(rendered(turn), 0, generated, 'hermes')).toBeNull();
    }
  });

  it('searches only from the cursor on', () => {
    const text = rendered(generated);
    expect(locateTurn(text, text.indexOf('<think>') + 1, generated, 'hermes')).toBeNull();
  });

  it('finds a turn whose edge whitespace the output parser trimmed, and marks it normalised', () => {
    const text = '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nok then<|im_end|>\n';
    const at = locateTurn(text, 0, '\tok then \n', 'hermes');
    expect(at).toMatchObject({ normalized: true });
    expect(text.slice(at!.start, at!.end)).toBe('ok then');
    expect(locateTurn(text, 0, ' ok  then', 'hermes')).toBeNull();
  });
});
