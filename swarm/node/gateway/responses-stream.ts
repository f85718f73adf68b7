/**
 * The Responses API's streaming shape: named server-sent events whose `event:` equals the data's `type`, each with
 * an increasing `sequence_number`. `response.created` (output []) and `response.in_progress` first; per output item
 * `response.output_item.added`, then for a message `response.content_part.added` before any
 * `response.output_text.delta`, then `.output_text.done`, `.content_part.done`; for a function call
 * `response.function_call_arguments.delta` / `.done`; for reasoning a `reasoning_text` part and
 * `response.reasoning_text.delta` / `.done`; then
 * `response.output_item.done`. Last `response.completed`, `response.incomplete` or `response.failed`, matching the
 * response's status. Codex drops text deltas that no `output_item.added` announced, so the order is kept exactly.
 */
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { OutputEvent } from './output-stream.ts';
import { openEventStream, writeEventFrame } from './sse.ts';

export type ResponseObject = Record<string, unknown> & { id: string; status: string; output: unknown[] };

/** Ids of responses and output items: OpenAI's prefixes (`resp_`, `msg_`, `fc_`, `rs_`) and 16 random bytes' worth. */
export function newItemId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}

type OpenItem = { kind: 'message' | 'reasoning'; id: string; outputIndex: number; text: string } | null;

export class ResponsesSseWriter {
  private sequence = 0;
  private outputIndex = -1;
  private open: OpenItem = null;
  /** Items finished so far, as the final response lists them. */
  readonly items: Record<string, unknown>[] = [];

  constructor(private readonly res: ServerResponse) {
    openEventStream(res);
  }

  start(response: ResponseObject): void {
    this.send('response.created', { response });
    this.send('response.in_progress', { response });
  }

  event(event: OutputEvent): void {
    if (event.type === 'tool_call') {
      this.close();
      const index = ++this.outputIndex;
      const id = newItemId('fc');
      const { name, arguments: args } = event.call.function;
      const item = { type: 'function_call', id, call_id: event.call.id, name, arguments: '', status: 'in_progress' };
      this.send('response.output_item.added', { output_index: index, item });
      this.send('response.function_call_arguments.delta', { item_id: id, output_index: index, delta: args });
      this.send('response.function_call_arguments.done', { item_id: id, output_index: index, name, arguments: args });
      const done = { ...item, arguments: args, status: 'completed' };
      this.send('response.output_item.done', { output_index: index, item: done });
      this.items.push(done);
      return;
    }
    const kind = event.type === 'content' ? 'message' : 'reasoning';
    if (this.open?.kind !== kind) this.openItem(kind);
    const open = this.open!;
    open.text += event.text;
    const where = { item_id: open.id, output_index: open.outputIndex, content_index: 0 };
    if (kind === 'message') this.send('response.output_text.delta', { ...where, delta: event.text, logprobs: [] });
    else this.send('response.reasoning_text.delta', { ...where, delta: event.text });
  }

  /**
   * Closes what is open and ends with the response's own terminal event; a response with no item at all gets an
   * empty message, so clients always see one.
   */
  finish(response: ResponseObject, status: 'completed' | 'incomplete'): void {
    this.close(status);
    if (this.items.length === 0) {
      this.openItem('message');
      this.close(status);
    }
    this.send(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: { ...response, output: this.items } });
    if (!this.res.destroyed) this.res.end();
  }

  /** A failure after the stream began (a context overflow, a failed generation): `response.failed`, then the end. */
  fail(response: ResponseObject, error: { code: string; message: string }): void {
    this.send('response.failed', { response: { ...response, status: 'failed', error, output: this.items } });
    if (!this.res.destroyed) this.res.end();
  }

  private openItem(kind: 'message' | 'reasoning'): void {
    this.close();
    const index = ++this.outputIndex;
    const id = newItemId(kind === 'message' ? 'msg' : 'rs');
    this.open = { kind, id, outputIndex: index, text: '' };
    if (kind === 'message') {
      this.send('response.output_item.added', { output_index: index, item: { type: 'message', id, status: 'in_progress', role: 'assistant', content: [] } });
      this.send('response.content_part.added', { item_id: id, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } });
    } else {
      this.send('response.output_item.added', { output_index: index, item: { type: 'reasoning', id, summary: [], content: [] } });
      this.send('response.content_part.added', { item_id: id, output_index: index, content_index: 0, part: { type: 'reasoning_text', text: '' } });
    }
  }

  private close(status: 'completed' | 'incomplete' = 'completed'): void {
    const open = this.open;
    if (!open) return;
    this.open = null;
    const where = { item_id: open.id, output_index: open.outputIndex, content_index: 0 };
    if (open.kind === 'message') {
      // As generated, like the recorded answer: a client that sends the item back sends what the tracker knows.
      const text = open.text;
      const part = { type: 'output_text', text, annotations: [], logprobs: [] };
      this.send('response.output_text.done', { ...where, text, logprobs: [] });
      this.send('response.content_part.done', { ...where, part });
      const item = { type: 'message', id: open.id, status, role: 'assistant', content: [part] };
      this.send('response.output_item.done', { output_index: open.outputIndex, item });
      this.items.push(item);
    } else {
      const part = { type: 'reasoning_text', text: open.text };
      this.send('response.reasoning_text.done', { ...where, text: part.text });
      this.send('response.content_part.done', { ...where, part });
      const item = { type: 'reasoning', id: open.id, summary: [], content: [part] };
      this.send('response.output_item.done', { output_index: open.outputIndex, item });
      this.items.push(item);
    }
  }

  private send(type: string, fields: Record<string, unknown>): void {
    const data = { type, sequence_number: this.sequence++, ...fields };
    writeEventFrame(this.res, data, type);
  }
}
