/**
 * Tokenizers and chat templates, shared by the engine thread (stop strings) and the gateway (prompt rendering,
 * incremental decoding). Pure: no Node APIs in these interfaces.
 */

export interface Tokenizer {
  readonly vocabSize: number;
  /** Ids that end an assistant turn (e.g. <|im_end|>, <|endoftext|>). */
  readonly eosTokenIds: number[];
  readonly padTokenId: number;
  /** Special tokens written in `text` (e.g. "<|im_start|>") are encoded as their single ids. */
  encode(text: string): number[];
  decode(ids: number[], options?: { skipSpecialTokens?: boolean }): string;
  /** The token's text as the vocabulary spells it (for the merge view's hover). */
  idToToken(id: number): string;
  isSpecial(id: number): boolean;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
  reasoning_content?: string;
}

/** OpenAI's tool declaration. */
export interface ToolSpec {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export type ToolCallFormat = 'hermes' | 'none';

export interface ChatTemplate {
  readonly toolCallFormat: ToolCallFormat;
  render(messages: ChatMessage[], options: ChatRenderOptions): string;
}

export interface ChatRenderOptions {
  tools?: ToolSpec[];
  addGenerationPrompt: boolean;
  /** Passed to templates that know it (Qwen3: `false` pre-fills an empty think block). Ignored elsewhere. */
  enableThinking?: boolean;
  /**
   * More variables for the template (vLLM's `chat_template_kwargs`), JSON values. Names the template's own
   * variables use (`messages`, `tools` …) are refused at the edge; the builtin template ignores them all.
   */
  templateKwargs?: Readonly<Record<string, unknown>>;
}

export interface ParsedAssistantOutput {
  content: string;
  toolCalls: ToolCall[];
  /** Tool-call blocks whose JSON did not parse: they stay in `content` and are flagged here. */
  malformed: string[];
  /** The text of a leading `<think>…</think>` block, removed from `content`. */
  reasoning?: string;
}
