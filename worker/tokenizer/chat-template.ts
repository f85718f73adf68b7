/**
 * Chat templates: the Jinja `chat_template` a Hugging Face tokenizer ships, and the builtin ChatML template of the
 * byte tokenizer. Both render OpenAI-style messages (tool calls and tool results included) into one prompt string.
 */
import { Template } from '@huggingface/jinja';
import { ChatTemplateError } from './errors.ts';
import { renderTemplate } from './jinja-render.ts';
import { parseJsonKeepingSource } from './python-json.ts';
import type {
  ChatMessage,
  ChatRenderOptions,
  ChatTemplate,
  ToolCall,
  ToolCallFormat,
  ToolSpec,
} from './types.ts';

/** Hermes-style templates announce tool calls with this tag (Qwen2.5, Qwen3, Hermes …). */
const HERMES_TOOL_CALL_TAG = '<tool_call>';

export interface JinjaChatTemplateOptions {
  /** The `chat_template` string from tokenizer_config.json (or chat_template.jinja). */
  template: string;
  bosToken?: string | null;
  eosToken?: string | null;
}

export class JinjaChatTemplate implements ChatTemplate {
  readonly toolCallFormat: ToolCallFormat;
  private readonly compiled: Template;

  constructor(private readonly options: JinjaChatTemplateOptions) {
    try {
      this.compiled = new Template(options.template);
    } catch (error) {
      throw new ChatTemplateError(`chat template does not compile: ${errorMessage(error)}`);
    }
    this.toolCallFormat = options.template.includes(HERMES_TOOL_CALL_TAG) ? 'hermes' : 'none';
  }

  render(messages: ChatMessage[], options: ChatRenderOptions): string {
    // Extra variables first, so that the template's own (which the gateway refuses as kwargs) always win.
    const context: Record<string, unknown> = {
      ...options.templateKwargs,
      messages: messages.map(toTemplateMessage),
      add_generation_prompt: options.addGenerationPrompt,
      bos_token: this.options.bosToken ?? '',
      eos_token: this.options.eosToken ?? '',
    };
    // Templates test `if tools`: leave it undefined rather than an empty list. Undefined fields are dropped
    // (`tojson` would trip over them); the schema objects themselves are kept, they carry their JSON source.
    if (options.tools && options.tools.length > 0) context.tools = options.tools.map(toTemplateTool);
    if (options.enableThinking !== undefined) context.enable_thinking = options.enableThinking;
    try {
      return renderTemplate(this.compiled, context);
    } catch (error) {
      throw new ChatTemplateError(`chat template failed to render: ${errorMessage(error)}`);
    }
  }
}

function toTemplateTool(tool: ToolSpec): Record<string, unknown> {
  const fn: Record<string, unknown> = { name: tool.function.name };
  if (tool.function.description !== undefined) fn.description = tool.function.description;
  if (tool.function.parameters !== undefined) fn.parameters = tool.function.parameters;
  return { type: tool.type, function: fn };
}

/** Plain objects without undefined fields (Jinja's `is defined` must see them as absent); null content as ''. */
function toTemplateMessage(message: ChatMessage): Record<string, unknown> {
  const plain: Record<string, unknown> = { role: message.role, content: message.content ?? '' };
  if (message.tool_calls && message.tool_calls.length > 0) {
    // Templates written for transformers expect `arguments` as a mapping (Llama's apply `tojson` to it).
    plain.tool_calls = message.tool_calls.map((call) => ({
      ...call,
      function: { name: call.function.name, arguments: parseArguments(call.function.arguments) },
    }));
  }
  if (message.tool_call_id !== undefined) plain.tool_call_id = message.tool_call_id;
  if (message.name !== undefined) plain.name = message.name;
  if (message.reasoning_content !== undefined) plain.reasoning_content = message.reasoning_content;
  return plain;
}

/**
 * The builtin template declares tools as one signature line each (`calc(expr: string): Evaluate arithmetic`)
 * instead of Qwen's ~450-byte preamble with the schemas as JSON: the builtin models read bytes, and attention over
 * every prompt byte is most of their cost. Tool calls and results keep Qwen's Hermes layout.
 */
const TOOLS_HEADING = '# Tools';

/**
 * ChatML with Hermes tool calls, laid out as Qwen's template lays out a conversation without thinking (except
 * for the shorter tool declaration above): tools are declared in the system turn, assistant tool calls follow the
 * content, and consecutive tool results share one user turn, each wrapped in <tool_response>.
 */
export class BuiltinChatTemplate implements ChatTemplate {
  readonly toolCallFormat: ToolCallFormat = 'hermes';

  render(messages: ChatMessage[], options: ChatRenderOptions): string {
    const tools = options.tools ?? [];
    const hasLeadingSystem = messages[0]?.role === 'system';
    let prompt = '';

    if (tools.length > 0) {
      const systemText = hasLeadingSystem ? `${messages[0].content ?? ''}\n\n` : '';
      prompt += `<|im_start|>system\n${systemText}${TOOLS_HEADING}${tools.map(renderToolSignature).join('')}<|im_end|>\n`;
    } else if (hasLeadingSystem) {
      prompt += `<|im_start|>system\n${messages[0].content ?? ''}<|im_end|>\n`;
    }

    messages.forEach((message, index) => {
      if (index === 0 && hasLeadingSystem) return;
      const content = message.content ?? '';
      if (message.role === 'user' || message.role === 'system') {
        prompt += `<|im_start|>${message.role}\n${content}<|im_end|>\n`;
      } else if (message.role === 'assistant') {
        prompt += `<|im_start|>assistant\n${content}${renderToolCalls(message.tool_calls ?? [], content !== '')}<|im_end|>\n`;
      } else {
        const previousIsTool = messages[index - 1]?.role === 'tool';
        const nextIsTool = messages[index + 1]?.role === 'tool';
        if (!previousIsTool) prompt += '<|im_start|>user';
        prompt += `\n<tool_response>\n${content}\n</tool_response>`;
        if (!nextIsTool) prompt += '<|im_end|>\n';
      }
    });

    if (options.addGenerationPrompt) prompt += '<|im_start|>assistant\n';
    return prompt;
  }
}

function renderToolSignature(tool: ToolSpec): string {
  const { name, description, parameters } = tool.function;
  const schema = (parameters ?? {}) as JsonSchema;
  const required = new Set(schema.required ?? []);
  const params = Object.entries(schema.properties ?? {}).map(
    ([param, spec]) => `${param}${required.has(param) ? '' : '?'}: ${schemaType(spec)}`,
  );
  return `\n${name}(${params.join(', ')})${description ? `: ${description}` : ''}`;
}

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
}

/** A JSON schema as a short type expression: `string`, `number[]`, `"c"|"f"`, `{city: string}`. */
function schemaType(schema: JsonSchema): string {
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join('|');
  const type = Array.isArray(schema.type) ? schema.type.join('|') : schema.type;
  if (type === 'array') return `${schema.items ? schemaType(schema.items) : 'any'}[]`;
  if (type === 'object' && schema.properties) {
    const required = new Set(schema.required ?? []);
    const fields = Object.entries(schema.properties).map(([k, v]) => `${k}${required.has(k) ? '' : '?'}: ${schemaType(v)}`);
    return `{${fields.join(', ')}}`;
  }
  return type ?? 'any';
}

/** Each call on its own lines after the content, as Qwen's template writes them. */
function renderToolCalls(calls: ToolCall[], hasContent: boolean): string {
  return calls
    .map((call, i) => {
      const separator = i > 0 || hasContent ? '\n' : '';
      const args = parseArguments(call.function.arguments);
      const argsJson = typeof args === 'string' ? args : toPythonStyleJson(args);
      return `${separator}<tool_call>\n{"name": "${call.function.name}", "arguments": ${argsJson}}\n</tool_call>`;
    })
    .join('');
}

/**
 * OpenAI sends `arguments` as JSON text; the Python servers (vLLM) `json.loads` it into a mapping for the template,
 * so here it is parsed keeping its number texts and key order, which `tojson` then writes as `json.dumps` would
 * (jinja-render.ts). Text that is not a JSON object is kept as it is.
 */
function parseArguments(args: string): Record<string, unknown> | string {
  try {
    const value: unknown = parseJsonKeepingSource(args);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : args;
  } catch {
    return args;
  }
}

/** JSON with Python's `json.dumps` separators (", " and ": "), as Jinja's `tojson` writes it in HF templates. */
export function toPythonStyleJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(toPythonStyleJson).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${toPythonStyleJson(v)}`).join(', ')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
