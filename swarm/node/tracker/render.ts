/**
 * Prompt rendering with drift prevention.
 *
 * Re-tokenizing an earlier model output can give other ids than the model generated (it wrote "hel" + "lo",
 * the tokenizer spells "hello" as one token), which silently breaks the token prefix that timeline merging relies
 * on. So the prompt is rendered to text with the chat template, each earlier assistant turn of the same episode is
 * located in that text, and where the text there is what was generated, the generated ids are spliced in; the
 * text between those turns is tokenized piece by piece. Splicing changes the tokenization, not what the model
 * reads: a turn the template renders differently (e.g. Qwen3 dropping the reasoning of turns before the last user
 * query) keeps the template's tokens, and the report says why. The one tolerance is tool-call formatting
 * (turn-match.ts): re-serialized arguments mean the same, so the model's own tokens are spliced for them.
 *
 * The pieces start and end at the generated span's edges, which sit after the template's assistant header and at
 * the end-of-turn special token, so tokenizing the pieces separately gives the same ids the original calls saw.
 *
 * Which call a turn came from: several calls may return the same text with different ids (a random model's "�",
 * a short "OK" sampled in other pieces), so equal text is not enough. The request's assistant turns are matched
 * to the calls in order: first the most recent unused call whose prompt is exactly the prompt spliced so far up to
 * this turn (it generated the turn in this very context); else the earliest unused call after the one matched to
 * the previous turn; only then any unused call.
 */
import type {
  ChatMessage,
  ChatTemplate,
  Tokenizer,
  ToolCall,
  ToolSpec,
} from '../../../worker/tokenizer/types.ts';
import type { SpliceOutcome, SpliceReport, TurnSplice } from '../../common/timeline/call.ts';
import { locateTurnCandidates, sortKeys, type TurnLocation } from './turn-match.ts';

/** An earlier call of the episode: what it generated and the assistant message that became of it. */
export interface GeneratedTurn {
  callId: string;
  /** The call's prompt ids; without them a turn is matched by order and text alone. */
  promptIds?: readonly number[];
  generatedIds: readonly number[];
  assistantMessage: ChatMessage | null;
  /** Ids that ended the call's prompt to force the answer's start (tool_choice); see RecordCallInput. */
  forcedPrefixIds?: readonly number[];
}

export interface RenderPromptInput {
  tokenizer: Tokenizer;
  template: ChatTemplate;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  enableThinking?: boolean;
  /** More template variables (ChatRenderOptions.templateKwargs). */
  templateKwargs?: Readonly<Record<string, unknown>>;
  /** The episode's earlier calls, oldest first. Empty: plain rendering, no splicing. */
  history: readonly GeneratedTurn[];
  /**
   * Ids of text pieces tokenized before, kept by the caller across the calls of one episode: an agent's later
   * prompts repeat the earlier ones, so only the new piece is tokenized (the episode's own prefix cache).
   */
  pieceCache?: PieceCache;
}

/**
 * Text piece → its ids, and generated ids → their text. Bounded so that an episode that never repeats itself
 * cannot grow it without end.
 */
export class PieceCache {
  private readonly ids = new Map<string, readonly number[]>();
  private readonly texts = new WeakMap<readonly number[], string>();

  decode(tokenizer: Tokenizer, ids: readonly number[]): string {
    let text = this.texts.get(ids);
    if (text === undefined) {
      text = tokenizer.decode([...ids]);
      this.texts.set(ids, text);
    }
    return text;
  }

  constructor(private readonly maxPieces = 4096) {}

  encode(tokenizer: Tokenizer, piece: string): readonly number[] {
    let ids = this.ids.get(piece);
    if (ids === undefined) {
      ids = tokenizer.encode(piece);
      if (this.ids.size >= this.maxPieces) this.ids.clear();
      this.ids.set(piece, ids);
    }
    return ids;
  }
}

export interface RenderedPrompt {
  /** The template's text (before splicing; spliced turns differ at most in tool-call formatting). */
  text: string;
  promptIds: number[];
  splice: SpliceReport;
}

export function renderPrompt(input: RenderPromptInput): RenderedPrompt {
  const { tokenizer, template, messages, tools, enableThinking, templateKwargs } = input;
  const history = input.history.map(withForcedPrefix);
  const text = template.render(messages, { tools, addGenerationPrompt: true, enableThinking, templateKwargs });
  const turns: TurnSplice[] = [];
  const used = new Set<string>();
  const pieces = input.pieceCache ?? new PieceCache();
  const generatedText = (ids: readonly number[]) => pieces.decode(tokenizer, ids);
  const prompt = new PromptBuilder(tokenizer, text, pieces);
  const endTokenTexts = new Map(tokenizer.eosTokenIds.map((id) => [id, tokenizer.decode([id])]));
  let lastMatched = -1;

  messages.forEach((message, messageIndex) => {
    if (message.role !== 'assistant') return;
    const ctx: TurnContext = {
      tokenizer,
      format: template.toolCallFormat,
      generatedText,
      text,
      cursor: prompt.textEnd,
      message,
      history,
      used,
      lastMatched,
      prompt,
      endTokenTexts,
    };
    const turn = spliceTurn(ctx);
    turns.push({ messageIndex, ...turn.record });
    if (turn.call) {
      // A rewritten turn still came from its call: later turns with the same text belong to later calls.
      used.add(turn.call.callId);
      lastMatched = history.indexOf(turn.call);
    }
    if (turn.span) prompt.splice(turn.span);
  });
  const promptIds = prompt.finish();

  return {
    text,
    promptIds,
    splice: {
      assistantTurns: turns.length,
      splicedTurns: turns.filter((t) => t.outcome === 'spliced' || t.outcome === 'spliced-by-text').length,
      driftPreventedTurns: turns.filter((t) => t.driftPrevented).length,
      turns,
    },
  };
}

/**
 * A forced start (tool_choice) was prompt for its call, but the template renders it as part of the turn: the turn
 * is prefix + generation, and the call's prompt ended before the prefix.
 */
function withForcedPrefix(call: GeneratedTurn): GeneratedTurn {
  const prefix = call.forcedPrefixIds ?? [];
  if (prefix.length === 0) return call;
  return {
    ...call,
    promptIds: call.promptIds?.slice(0, call.promptIds.length - prefix.length),
    generatedIds: [...prefix, ...call.generatedIds],
    forcedPrefixIds: [],
  };
}

interface SplicedSpan extends TurnLocation {
  ids: readonly number[];
  /** The generated end token stands where the template wrote another one. */
  endTokenReplaced?: boolean;
  /** Located by the end token alone: used only where the call's own prompt ends. */
  onlyAfterOwnPrompt?: boolean;
}

interface TurnResult {
  record: Omit<TurnSplice, 'messageIndex'>;
  /** The call the turn was matched to (spliced or rewritten), or null. */
  call: GeneratedTurn | null;
  span: SplicedSpan | null;
}

/** The prompt's ids, built left to right: text pieces tokenized apart, spliced spans as generated. */
class PromptBuilder {
  private readonly ids: number[] = [];
  /** Where the text not yet tokenized starts. */
  textEnd = 0;
  private readonly prefixCache = new Map<number, readonly number[]>();

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly text: string,
    private readonly pieces: PieceCache,
  ) {}

  encode(piece: string): readonly number[] {
    return this.pieces.encode(this.tokenizer, piece);
  }

  /** The prompt's ids up to text offset `start` (≥ textEnd), were the next span spliced there. */
  idsBefore(start: number): readonly number[] {
    let ids = this.prefixCache.get(start);
    if (ids === undefined) {
      ids = [...this.ids, ...this.encode(this.text.slice(this.textEnd, start))];
      this.prefixCache.set(start, ids);
    }
    return ids;
  }

  splice(span: SplicedSpan): void {
    this.ids.push(...this.encode(this.text.slice(this.textEnd, span.start)), ...span.ids);
    this.textEnd = span.end;
    this.prefixCache.clear();
  }

  finish(): number[] {
    return [...this.ids, ...this.encode(this.text.slice(this.textEnd))];
  }
}

interface TurnContext {
  tokenizer: Tokenizer;
  format: ChatTemplate['toolCallFormat'];
  /** The decoded text of generated ids (special tokens spelled out), decoded once per episode. */
  generatedText: (ids: readonly number[]) => string;
  text: string;
  cursor: number;
  message: ChatMessage;
  history: readonly GeneratedTurn[];
  used: ReadonlySet<string>;
  /** History index of the call matched to the request's previous assistant turn, -1 before the first. */
  lastMatched: number;
  prompt: PromptBuilder;
  /** The text of each end-of-turn token id (special tokens spelled out). */
  endTokenTexts: ReadonlyMap<number, string>;
}

function spliceTurn(ctx: TurnContext): TurnResult {
  const unused = ctx.history.filter((call) => !ctx.used.has(call.callId)); // oldest first
  const byMessage = unused.filter(
    (call) => call.assistantMessage !== null && sameAssistantMessage(call.assistantMessage, ctx.message),
  );
  const byGeneration = pickLocatedCall(ctx, byMessage);
  if (byGeneration)
    return spliced(
      ctx,
      byGeneration.call,
      byGeneration.span,
      'spliced',
      'the turn is the generation of this call',
    );
  if (byMessage.length > 0) return rewrittenTurn(ctx, inOrder(ctx, byMessage));

  // Text-level fallback: no call returned this exact message (the client changed its form), but a call's
  // generated text may still be what was rendered here.
  const byText = pickLocatedCall(
    ctx,
    unused.filter((c) => mentionsMessage(ctx.generatedText(c.generatedIds), ctx.message)),
  );
  if (byText)
    return spliced(
      ctx,
      byText.call,
      byText.span,
      'spliced-by-text',
      'this call generated the text rendered here',
    );
  return notSpliced(null, 'no-generated-call', 'no earlier call of this episode generated this turn');
}

interface LocatedCall {
  call: GeneratedTurn;
  span: SplicedSpan;
}

/**
 * Of the candidates (oldest first) whose generation is found in the text: the most recent one that was prompted
 * with exactly the prompt spliced so far up to its span, else the first in order (see inOrder).
 */
function pickLocatedCall(ctx: TurnContext, candidates: readonly GeneratedTurn[]): LocatedCall | null {
  const located: LocatedCall[] = [];
  for (const call of candidates) {
    const span = locateGeneration(ctx, call);
    if (span) located.push({ call, span });
  }
  if (located.length === 0) return null;
  const extending = located.filter(
    ({ call, span }) =>
      call.promptIds !== undefined && sameIds(call.promptIds, ctx.prompt.idsBefore(span.start)),
  );
  if (extending.length > 0) return extending[extending.length - 1];
  const call = inOrder(
    ctx,
    located.map((l) => l.call),
  );
  return located.find((l) => l.call === call)!;
}

/** The earliest candidate made after the call of the previous turn; without one, the most recent candidate. */
function inOrder(ctx: TurnContext, candidates: readonly GeneratedTurn[]): GeneratedTurn {
  return (
    candidates.find((call) => ctx.history.indexOf(call) > ctx.lastMatched) ??
    candidates[candidates.length - 1]
  );
}

function spliced(
  ctx: TurnContext,
  call: GeneratedTurn,
  span: SplicedSpan,
  outcome: 'spliced' | 'spliced-by-text',
  why: string,
): TurnResult {
  // Drift is judged on turns rendered exactly as generated; a normalized turn's text differs anyway.
  const driftPrevented =
    !span.normalized &&
    !span.endTokenReplaced &&
    !sameIds(ctx.prompt.encode(ctx.text.slice(span.start, span.end)), span.ids);
  const notes = [
    span.normalized ? 'tool-call formatting differed, the model’s own tokens were used' : '',
    span.endTokenReplaced ? 'the generated end token stands in for the template’s' : '',
    driftPrevented ? 're-tokenizing would have drifted' : '',
  ].filter(Boolean);
  return {
    record: {
      callId: call.callId,
      outcome,
      detail: `${why}; its ids were spliced in${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`,
      driftPrevented,
      normalized: span.normalized,
      tokens: span.ids.length,
    },
    call,
    span,
  };
}

function rewrittenTurn(ctx: TurnContext, call: GeneratedTurn): TurnResult {
  if (call.generatedIds.length === 0) {
    return { ...notSpliced(call.callId, 'empty-generation', 'the matching call generated no tokens'), call };
  }
  const reasoningDropped =
    call.assistantMessage?.reasoning_content !== undefined && ctx.message.reasoning_content === undefined;
  const detail = reasoningDropped
    ? 'the client sent this turn back without its reasoning, so it renders differently from what was generated'
    : 'the template renders this turn differently from what was generated (e.g. it drops the reasoning of turns before the last user query)';
  return {
    ...notSpliced(call.callId, 'template-rewrote-turn', `${detail}; its text was tokenized anew`),
    call,
  };
}

function notSpliced(callId: string | null, outcome: SpliceOutcome, detail: string): TurnResult {
  return {
    record: { callId, outcome, detail, driftPrevented: false, normalized: false, tokens: 0 },
    call: null,
    span: null,
  };
}

/**
 * Finds the call's generation in the rendered text at or after the cursor. Of several possible places, the one
 * right after the call's own prompt wins (see locateTurnCandidates).
 *
 * When the template ends the turn with another end token than the one generated (the model stopped on
 * <|endoftext|>, the template writes <|im_end|>), the generation without its end token is located and the
 * template's end token is replaced by the generated one: the prompt then continues exactly the sequence the model
 * produced, so the call extends the earlier one's timeline instead of starting a new one.
 */
function locateGeneration(ctx: TurnContext, call: GeneratedTurn): SplicedSpan | null {
  const spans = candidateSpans(ctx, call);
  const afterOwnPrompt = spans.find(
    (span) => call.promptIds !== undefined && sameIds(call.promptIds, ctx.prompt.idsBefore(span.start)),
  );
  return afterOwnPrompt ?? spans.find((span) => !span.onlyAfterOwnPrompt) ?? null;
}

/**
 * Where the generation may sit, most precise first: its text followed by an end-of-turn token (every rendered turn
 * ends with one, so this skips look-alikes inside other messages), then its text alone.
 */
function candidateSpans(ctx: TurnContext, call: GeneratedTurn): SplicedSpan[] {
  const ids = call.generatedIds;
  const last = ids.at(-1);
  const endsWithEndToken = last !== undefined && ctx.tokenizer.eosTokenIds.includes(last);
  const body = endsWithEndToken ? ids.slice(0, -1) : ids;
  const bodyText = ctx.generatedText(body);
  const generatedEnd = endsWithEndToken ? ctx.endTokenTexts.get(last) : null;
  const endTexts = [...ctx.endTokenTexts.values()].filter((t) => t !== '');
  const spans: SplicedSpan[] = [];
  const locate = (text: string) => locateTurnCandidates(ctx.text, ctx.cursor, text, ctx.format);

  for (const endText of endTexts) {
    for (const text of new Set([bodyText + endText, bodyText.trimEnd() + endText])) {
      if (bodyText.trim() === '') continue;
      for (const location of locate(text)) {
        spans.push(
          endsWithEndToken
            ? { ...location, ids, endTokenReplaced: endText !== generatedEnd }
            : // A generation cut before its end token: the template's end token follows it.
              { ...location, end: location.end - endText.length, ids },
        );
      }
    }
  }
  for (const location of locate(ctx.generatedText(ids))) spans.push({ ...location, ids });
  if (endsWithEndToken) for (const location of locate(bodyText)) spans.push({ ...location, ids: body });

  if (endsWithEndToken && bodyText.trim() === '') {
    // The model ended its turn at once: only the template's end token marks the spot, and every turn has one,
    // so a spot is trusted only right after the call's own prompt.
    for (let at = ctx.cursor; at < ctx.text.length; at++) {
      const endText = endTexts.find((text) => ctx.text.startsWith(text, at));
      if (endText === undefined) continue;
      const span = { start: at, end: at + endText.length, normalized: false, ids };
      spans.push({ ...span, endTokenReplaced: endText !== generatedEnd, onlyAfterOwnPrompt: true });
    }
  }
  return spans;
}

/** Same content and same tool calls (arguments compared as JSON when they parse); ids and reasoning are not compared. */
export function sameAssistantMessage(a: ChatMessage, b: ChatMessage): boolean {
  if (a.role !== 'assistant' || b.role !== 'assistant') return false;
  if ((a.content ?? '') !== (b.content ?? '')) return false;
  const callsA = a.tool_calls ?? [];
  const callsB = b.tool_calls ?? [];
  return callsA.length === callsB.length && callsA.every((call, i) => sameToolCall(call, callsB[i]));
}

function sameToolCall(a: ToolCall, b: ToolCall): boolean {
  return (
    a.function.name === b.function.name &&
    canonicalJson(a.function.arguments) === canonicalJson(b.function.arguments)
  );
}

function canonicalJson(text: string): string {
  try {
    return JSON.stringify(sortKeys(JSON.parse(text)));
  } catch {
    return text;
  }
}

/** Whether a generation contains the message's content and names its tool calls (text-fallback candidates). */
function mentionsMessage(generated: string, message: ChatMessage): boolean {
  const content = message.content ?? '';
  const names = (message.tool_calls ?? []).map((c) => c.function.name);
  if (content === '' && names.length === 0) return false;
  return generated.includes(content) && names.every((name) => generated.includes(name));
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}
