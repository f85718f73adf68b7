/**
 * Finds where a generated turn sits in a rendered prompt.
 *
 * Exactly, when the template rendered the turn's text as it was generated. Or, for Hermes tool calls, up to
 * formatting: clients and parsers re-serialize tool-call arguments (`{"city":"Paris"}` for the model's
 * `{"city": "Paris"}`) and trim whitespace around `<tool_call>` blocks, which changes no meaning but would break
 * every tool-using episode's prefix. Then the rendered span may differ from the generation only inside tool-call
 * blocks (same JSON once parsed) and in whitespace next to them; everything else (reasoning, content, end token)
 * must be identical. Or up to whitespace at the turn's edges, which output parsers trim.
 */
import type { ToolCallFormat } from '../../../worker/tokenizer/types.ts';

export interface TurnLocation {
  /** [start, end) in the rendered text. */
  start: number;
  end: number;
  /** True when the rendered span differs from the generated text in tool-call formatting. */
  normalized: boolean;
}

const TOOL_CALL_OPEN = '<tool_call>';
const TOOL_CALL_CLOSE = '</tool_call>';

export function locateTurn(
  rendered: string,
  from: number,
  generated: string,
  format: ToolCallFormat,
): TurnLocation | null {
  return locateTurnCandidates(rendered, from, generated, format)[0] ?? null;
}

/**
 * Every place the turn may sit, most exact first. More than one when the generation starts with whitespace: the
 * exact match can then begin inside the template's assistant header (its "\n"), while the parser trimmed that
 * whitespace from the content, so the trimmed text's span is where the ids belong. The caller decides with the
 * call's own prompt.
 */
export function locateTurnCandidates(
  rendered: string,
  from: number,
  generated: string,
  format: ToolCallFormat,
): TurnLocation[] {
  if (generated === '') return [];
  const found: TurnLocation[] = [];
  const start = rendered.indexOf(generated, from);
  if (start >= 0) found.push({ start, end: start + generated.length, normalized: false });
  const toolCalls = format === 'hermes' ? locateUpToToolCallFormatting(rendered, from, generated) : null;
  if (toolCalls) found.push(toolCalls);
  const trimmed = locateUpToEdgeWhitespace(rendered, from, generated);
  if (trimmed && !found.some((l) => l.start === trimmed.start && l.end === trimmed.end)) found.push(trimmed);
  return found;
}

/**
 * Output parsers (ours included) trim the content's leading and trailing whitespace, so the template re-renders
 * "\tok " as "ok". The span of the trimmed text is where the generated ids belong.
 */
function locateUpToEdgeWhitespace(rendered: string, from: number, generated: string): TurnLocation | null {
  const core = generated.trim();
  if (core === '' || core === generated) return null;
  const start = rendered.indexOf(core, from);
  return start >= 0 ? { start, end: start + core.length, normalized: true } : null;
}

/** The generation as text between tool-call blocks (`plains`, one more than blocks) and the blocks' insides. */
interface SplitTurn {
  plains: string[];
  blocks: string[];
}

function splitToolCalls(generated: string): SplitTurn | null {
  const plains: string[] = [];
  const blocks: string[] = [];
  let pos = 0;
  for (
    let open = generated.indexOf(TOOL_CALL_OPEN);
    open >= 0;
    open = generated.indexOf(TOOL_CALL_OPEN, pos)
  ) {
    const close = generated.indexOf(TOOL_CALL_CLOSE, open);
    if (close < 0) return null; // an unclosed block was not a tool call the template can re-render
    plains.push(generated.slice(pos, open));
    blocks.push(generated.slice(open + TOOL_CALL_OPEN.length, close));
    pos = close + TOOL_CALL_CLOSE.length;
  }
  plains.push(generated.slice(pos));
  return blocks.length > 0 ? { plains, blocks } : null;
}

function locateUpToToolCallFormatting(
  rendered: string,
  from: number,
  generated: string,
): TurnLocation | null {
  const turn = splitToolCalls(generated);
  if (!turn) return null;
  const head = turn.plains[0].trimEnd();
  const anchor = head === '' ? TOOL_CALL_OPEN : head;
  for (let start = rendered.indexOf(anchor, from); start >= 0; start = rendered.indexOf(anchor, start + 1)) {
    const end = matchAt(rendered, start, turn, head);
    if (end !== null) return { start, end, normalized: true };
  }
  return null;
}

/** Where the turn ends if it matches at `start`, else null. */
function matchAt(rendered: string, start: number, turn: SplitTurn, head: string): number | null {
  let pos = start;
  const expect = (piece: string): boolean => {
    if (!rendered.startsWith(piece, pos)) return false;
    pos += piece.length;
    return true;
  };
  const skipWhitespace = () => {
    while (pos < rendered.length && /\s/.test(rendered[pos])) pos++;
  };
  if (!expect(head)) return null;
  for (let i = 0; i < turn.blocks.length; i++) {
    skipWhitespace();
    if (!expect(TOOL_CALL_OPEN)) return null;
    const close = rendered.indexOf(TOOL_CALL_CLOSE, pos);
    if (close < 0 || canonicalToolCall(rendered.slice(pos, close)) !== canonicalToolCall(turn.blocks[i]))
      return null;
    pos = close + TOOL_CALL_CLOSE.length;
    const between = turn.plains[i + 1];
    const isLast = i === turn.blocks.length - 1;
    // Text after the last block (e.g. the end-of-turn token) must follow exactly, up to leading whitespace.
    skipWhitespace();
    if (!expect(isLast ? between.trimStart() : between.trim())) return null;
  }
  return pos;
}

/** A tool call's JSON with sorted keys and parsed arguments, or the raw text when it is not JSON. */
function canonicalToolCall(inside: string): string {
  try {
    const call = JSON.parse(inside.trim()) as Record<string, unknown>;
    if (typeof call.arguments === 'string') call.arguments = JSON.parse(call.arguments);
    return JSON.stringify(sortKeys(call));
  } catch {
    return inside.trim();
  }
}

export function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => [k, sortKeys(v)]),
  );
}
