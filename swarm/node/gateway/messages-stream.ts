/**
 * Anthropic's streaming shape for `POST /v1/messages`: named server-sent events whose `event:` always equals the
 * data's `type`. `message_start` (empty content, usage with the prompt's input tokens), a `ping`, then per content
 * block `content_block_start` / `content_block_delta` (`text_delta`, `thinking_delta`, `input_json_delta`) /
 * `content_block_stop`, then `message_delta` (stop reason, stop sequence, the output tokens' total: the SDK
 * replaces, it does not add) and `message_stop`. Each event is written as soon as it exists.
 */
import type { ServerResponse } from 'node:http';
import type { AnthropicStopReason } from '../../common/anthropic-api.ts';
import { anthropicErrorType } from '../../common/anthropic-api.ts';
import { HttpError } from '../http/errors.ts';
import type { OutputEvent } from './output-stream.ts';
import { openEventStream, writeEventFrame } from './sse.ts';

type OpenBlock = 'text' | 'thinking' | null;

export class AnthropicSseWriter {
  private index = -1;
  private open: OpenBlock = null;

  constructor(private readonly res: ServerResponse) {
    openEventStream(res);
  }

  start(message: { id: string; model: string; inputTokens: number }): void {
    this.send({
      type: 'message_start',
      message: {
        id: message.id,
        type: 'message',
        role: 'assistant',
        model: message.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: message.inputTokens, output_tokens: 0 },
      },
    });
    this.send({ type: 'ping' });
  }

  event(event: OutputEvent): void {
    if (event.type === 'tool_call') {
      this.close();
      this.index += 1;
      const call = event.call;
      // A tool_use block starts with an empty input and fills through input_json_delta, as Anthropic streams it.
      this.send({ type: 'content_block_start', index: this.index, content_block: { type: 'tool_use', id: call.id, name: call.function.name, input: {} } });
      this.send({ type: 'content_block_delta', index: this.index, delta: { type: 'input_json_delta', partial_json: call.function.arguments } });
      this.send({ type: 'content_block_stop', index: this.index });
      return;
    }
    const kind = event.type === 'content' ? 'text' : 'thinking';
    if (this.open !== kind) {
      this.close();
      this.index += 1;
      this.open = kind;
      this.send({ type: 'content_block_start', index: this.index, content_block: kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' } });
    }
    const delta = kind === 'text' ? { type: 'text_delta', text: event.text } : { type: 'thinking_delta', thinking: event.text };
    this.send({ type: 'content_block_delta', index: this.index, delta });
  }

  finish(stopReason: AnthropicStopReason, stopSequence: string | null, outputTokens: number): void {
    this.close();
    this.send({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: stopSequence }, usage: { output_tokens: outputTokens } });
    this.send({ type: 'message_stop' });
    if (!this.res.destroyed) this.res.end();
  }

  /** An error after the stream began: Anthropic's in-band `error` event, then the stream ends. */
  error(err: unknown): void {
    const status = err instanceof HttpError ? err.status : 500;
    const message = err instanceof HttpError ? err.message : 'generation failed; the peer log has the details';
    this.send({ type: 'error', error: { type: anthropicErrorType(status), message } });
    if (!this.res.destroyed) this.res.end();
  }

  private close(): void {
    if (this.open === 'thinking') this.send({ type: 'content_block_delta', index: this.index, delta: { type: 'signature_delta', signature: '' } });
    if (this.open !== null) this.send({ type: 'content_block_stop', index: this.index });
    this.open = null;
  }

  private send(data: { type: string } & Record<string, unknown>): void {
    writeEventFrame(this.res, data, data.type);
  }
}
