/**
 * The streaming wire format as the official client reads it: a real HTTP server writes chunks with SseWriter (tool
 * call deltas included) and `openai`'s stream helper rebuilds the message.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SseWriter } from './sse.ts';

let server: Server;
let baseURL: string;

beforeAll(async () => {
  server = createServer((_req, res) => {
    const sse = new SseWriter(res, { id: 'chatcmpl-test', created: 1, model: 'tiny' });
    sse.roleChunk(0);
    sse.choiceEvent(0, { type: 'content', text: 'Let me ' }, []);
    sse.choiceEvent(0, { type: 'content', text: 'check.' }, [{ token: 'check', logprob: -0.25, bytes: [99], top_logprobs: [] }]);
    sse.choiceEvent(0, { type: 'tool_call', call: { id: 'call_a', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } } }, []);
    sse.choiceEvent(0, { type: 'tool_call', call: { id: 'call_b', type: 'function', function: { name: 'open', arguments: '{}' } } }, []);
    sse.finishChunk(0, 'tool_calls', []);
    sse.usageChunk({ prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 });
    sse.done();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('SseWriter', () => {
  it('streams content, tool calls, finish reason and usage that the openai client assembles', async () => {
    const client = new OpenAI({ baseURL, apiKey: 'k', maxRetries: 0 });
    const stream = client.chat.completions.stream({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], stream_options: { include_usage: true } });
    const completion = await stream.finalChatCompletion();
    const choice = completion.choices[0];
    expect(choice.message.content).toBe('Let me check.');
    expect(choice.message.tool_calls?.map((c) => c.type === 'function' && [c.id, c.function.name, c.function.arguments])).toEqual([
      ['call_a', 'lookup', '{"q":"x"}'],
      ['call_b', 'open', '{}'],
    ]);
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.logprobs?.content?.[0].logprob).toBe(-0.25);
    expect(completion.usage?.total_tokens).toBe(14);
  });
});
