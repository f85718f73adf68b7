/**
 * Server-sent events in OpenAI's streaming shape: `chat.completion.chunk` objects, one per `data:` line, and
 * `data: [DONE]` at the end. Each chunk is written as soon as it exists (no buffering), so tokens reach the client
 * as they are sampled.
 */
import type { ServerResponse } from 'node:http';
import { HttpError } from '../http/errors.ts';
import type { LogprobEntry, OpenAiFinishReason } from './completion-choice.ts';
import type { OutputEvent } from './output-stream.ts';

/** Starts an event stream: headers out at once, no proxy buffering, so each frame reaches the client as written. */
export function openEventStream(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  res.flushHeaders();
}

/** One frame (`event:` named when given); a client that hung up has a destroyed socket: nothing more to say to it. */
export function writeEventFrame(res: ServerResponse, data: unknown, event?: string): void {
  if (res.writableEnded || res.destroyed) return;
  res.write(`${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`);
}

export interface SseIdentity {
  id: string;
  created: number;
  model: string;
}

export class SseWriter {
  private toolCallCounts = new Map<number, number>();

  constructor(
    private readonly res: ServerResponse,
    private readonly identity: SseIdentity,
    /** `return_token_ids`: the prompt's ids on the first chunk, each choice's new ids on its chunks (vLLM's fields). */
    private readonly options: { tokenIds?: boolean } = {},
  ) {
    openEventStream(res);
  }

  roleChunk(index: number, promptTokenIds?: readonly number[]): void {
    const prompt = this.options.tokenIds && promptTokenIds ? { prompt_token_ids: promptTokenIds } : {};
    this.write({ ...this.head(), ...prompt, choices: [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] });
  }

  choiceEvent(index: number, event: OutputEvent, logprobs: LogprobEntry[], tokenIds: number[] = []): void {
    let delta: Record<string, unknown>;
    if (event.type === 'content') delta = { content: event.text };
    else if (event.type === 'reasoning') delta = { reasoning_content: event.text };
    else {
      const callIndex = this.toolCallCounts.get(index) ?? 0;
      this.toolCallCounts.set(index, callIndex + 1);
      delta = { tool_calls: [{ index: callIndex, id: event.call.id, type: 'function', function: event.call.function }] };
    }
    this.chunk([{ index, delta, logprobs: logprobs.length ? { content: logprobs, refusal: null } : null, finish_reason: null, ...this.ids(tokenIds) }]);
  }

  finishChunk(index: number, reason: OpenAiFinishReason, logprobs: LogprobEntry[], tokenIds: number[] = []): void {
    this.chunk([{ index, delta: {}, logprobs: logprobs.length ? { content: logprobs, refusal: null } : null, finish_reason: reason, ...this.ids(tokenIds) }]);
  }

  usageChunk(usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; prompt_tokens_details?: { cached_tokens: number } }): void {
    this.write({ ...this.head(), choices: [], usage });
  }

  /** An error after the stream began: reported in-band (the status line is long gone), then the stream ends. */
  error(err: unknown): void {
    const message = err instanceof HttpError ? err.message : 'generation failed; the peer log has the details';
    const code = err instanceof HttpError ? (err.details.code ?? null) : 'internal_error';
    this.write({ error: { message, type: 'server_error', param: null, code } });
    if (!this.res.destroyed) this.res.end();
  }

  done(): void {
    if (!this.res.destroyed) this.res.end('data: [DONE]\n\n');
  }

  private ids(tokenIds: number[]) {
    return this.options.tokenIds ? { token_ids: tokenIds } : {};
  }

  private head() {
    return { id: this.identity.id, object: 'chat.completion.chunk', created: this.identity.created, model: this.identity.model, system_fingerprint: null };
  }

  private chunk(choices: unknown[]): void {
    this.write({ ...this.head(), choices });
  }

  private write(value: unknown): void {
    writeEventFrame(this.res, value);
  }
}
