/**
 * Turns a model's raw assistant text into OpenAI's shape: reasoning, content and tool calls.
 * Hermes format: `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, possibly several, after the content.
 */
import type { ParsedAssistantOutput, ToolCall, ToolCallFormat } from './types.ts';

export interface ParseOptions {
  /** Makes tool-call ids; injectable so that tests and replays are deterministic. */
  newToolCallId?: () => string;
}

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';
// The closing tag may be missing when generation stopped (eos, max tokens) inside the last block.
const HERMES_BLOCK = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;
const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const ID_LENGTH = 24;

export function parseAssistantOutput(
  text: string,
  format: ToolCallFormat,
  options: ParseOptions = {},
): ParsedAssistantOutput {
  const { reasoning, rest } = splitReasoning(text);
  const parsed: ParsedAssistantOutput = { content: rest.trim(), toolCalls: [], malformed: [] };
  if (reasoning !== undefined) parsed.reasoning = reasoning;
  if (format === 'none') return parsed;

  const newId = options.newToolCallId ?? randomToolCallId;
  const kept: string[] = [];
  let plainStart = 0;
  for (const match of rest.matchAll(HERMES_BLOCK)) {
    kept.push(rest.slice(plainStart, match.index));
    plainStart = match.index + match[0].length;
    const call = parseHermesCall(match[1]);
    if (call) {
      parsed.toolCalls.push({ id: newId(), type: 'function', function: call });
    } else {
      parsed.malformed.push(match[0]);
      kept.push(match[0]);
    }
  }
  kept.push(rest.slice(plainStart));
  parsed.content = kept.join('').trim();
  return parsed;
}

/**
 * A leading `<think>…</think>` block is reasoning. Templates that pre-fill `<think>` in the generation prompt make
 * the model's text start inside the block, so a lone `</think>` also ends reasoning.
 */
function splitReasoning(text: string): { reasoning?: string; rest: string } {
  const close = text.indexOf(THINK_CLOSE);
  if (close < 0) return { rest: text };
  const before = text.slice(0, close);
  const open = before.indexOf(THINK_OPEN);
  if (open >= 0 && before.slice(0, open).trim() !== '') return { rest: text };
  const reasoning = (open >= 0 ? before.slice(open + THINK_OPEN.length) : before).trim();
  return { reasoning, rest: text.slice(close + THINK_CLOSE.length) };
}

function parseHermesCall(body: string): ToolCall['function'] | null {
  let value: unknown;
  try {
    value = JSON.parse(body.trim());
  } catch {
    return null;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const { name, arguments: args, parameters } = value as Record<string, unknown>;
  if (typeof name !== 'string' || name === '') return null;
  const rawArgs = args ?? parameters ?? {};
  return { name, arguments: typeof rawArgs === 'string' ? rawArgs : JSON.stringify(rawArgs) };
}

export function randomToolCallId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(ID_LENGTH));
  let id = 'call_';
  for (const byte of bytes) id += ID_ALPHABET[byte % ID_ALPHABET.length];
  return id;
}
