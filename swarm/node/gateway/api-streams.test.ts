/**
 * The Messages and Responses stream writers with output the builtin model rarely produces — reasoning, text and a
 * tool call in one answer — read by the official SDKs' own stream parsers (`messages.stream`, `responses.stream`)
 * over HTTP on 127.0.0.1. The writers are the gateway's own; only the answer's events are given.
 */
import { createServer, type Server } from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AnthropicSseWriter } from './messages-stream.ts';
import type { OutputEvent } from './output-stream.ts';
import { ResponsesSseWriter } from './responses-stream.ts';

const answer: OutputEvent[] = [
  { type: 'reasoning', text: 'the user wants ' },
  { type: 'reasoning', text: 'the weather' },
  { type: 'content', text: 'Checking ' },
  { type: 'content', text: 'now.' },
  { type: 'tool_call', call: { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo","days":1.0}' } } },
];

let server: Server;
let origin: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    if (req.url?.startsWith('/v1/messages')) {
      const sse = new AnthropicSseWriter(res);
      sse.start({ id: 'msg_1', model: 'tiny', inputTokens: 11 });
      for (const event of answer) sse.event(event);
      sse.finish('tool_use', null, 7);
    } else {
      const sse = new ResponsesSseWriter(res);
      const response = { id: 'resp_1', object: 'response', created_at: 0, status: 'in_progress', model: 'tiny', output: [], usage: null };
      sse.start(response);
      for (const event of answer) sse.event(event);
      sse.finish({ ...response, status: 'completed', usage: { input_tokens: 11, output_tokens: 7, total_tokens: 18, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 3 } } }, 'completed');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('stream writers, read by the official SDKs', () => {
  it("Anthropic's messages.stream assembles thinking, text and a tool_use with its input", async () => {
    const client = new Anthropic({ baseURL: origin, apiKey: 'k', maxRetries: 0 });
    const stream = client.messages.stream({ model: 'tiny', max_tokens: 8, messages: [{ role: 'user', content: 'weather?' }] });
    const thinking: string[] = [];
    stream.on('thinking', (delta) => thinking.push(delta));
    const final = await stream.finalMessage();
    expect(final.content.map((b) => b.type)).toEqual(['thinking', 'text', 'tool_use']);
    expect(final.content[0]).toMatchObject({ type: 'thinking', thinking: 'the user wants the weather' });
    expect(final.content[1]).toMatchObject({ type: 'text', text: 'Checking now.' });
    expect(final.content[2]).toMatchObject({ type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Oslo', days: 1 } });
    expect(final.stop_reason).toBe('tool_use');
    expect(final.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 });
    expect(thinking.join('')).toBe('the user wants the weather');
  });

  it("OpenAI's responses.stream assembles reasoning, the message and the function call", async () => {
    const client = new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'k', maxRetries: 0 });
    const stream = client.responses.stream({ model: 'tiny', input: 'weather?' });
    const final = await stream.finalResponse();
    expect(final.output.map((i) => i.type)).toEqual(['reasoning', 'message', 'function_call']);
    expect(final.output_text).toBe('Checking now.');
    expect(final.output[2]).toMatchObject({ type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo","days":1.0}', status: 'completed' });
    expect(final.usage?.output_tokens_details.reasoning_tokens).toBe(3);
  });
});
