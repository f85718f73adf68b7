/**
 * Anthropic's Messages API end to end: a real peer with builtin:tiny, driven by the official `@anthropic-ai/sdk`
 * (base URL = the peer's origin, as with Anthropic) and by recorded request shapes (Claude Code's) over fetch.
 * builtin:tiny is warm-started on the calculator agent's conversations, so with that agent's system prompt and tool,
 * greedy, it calls `calc`: a real tool_use → tool_result round trip.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { getCalls, getTimelines } from '../store/episode-reads.ts';
import { startTestPeer, type TestPeer } from './testing/peer.ts';

let peer: TestPeer;
beforeAll(async () => {
  peer = await startTestPeer();
});
afterAll(async () => peer?.stop());

const anthropicFor = (episode: CreateEpisodeResponse) => new Anthropic({ baseURL: peer.origin, apiKey: episode.apiKey, maxRetries: 0 });

const CALC_TOOL: Anthropic.Tool = {
  name: 'calc',
  description: 'Evaluate arithmetic',
  input_schema: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
};

interface AnthropicErrorBody {
  type: string;
  error: { type: string; message: string };
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${peer.origin}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as AnthropicErrorBody & Record<string, unknown> };
}

/** Server-sent events as written: each frame's `event:` name and its parsed data. */
function frames(text: string): { event: string; data: { type: string } & Record<string, unknown> }[] {
  return text
    .split('\n\n')
    .filter((frame) => frame.trim() !== '')
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)![1];
      const data = JSON.parse(/^data: (.*)$/m.exec(frame)![1]) as { type: string } & Record<string, unknown>;
      return { event, data };
    });
}

describe('messages with the official SDK', () => {
  it('creates a message (Bearer auth, the origin as base URL) with usage equal to what was recorded', async () => {
    const episode = await peer.startEpisode();
    const message = await anthropicFor(episode).messages.create({
      model: 'tiny',
      max_tokens: 6,
      system: 'be brief',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }],
    });
    expect(message.type).toBe('message');
    expect(message.role).toBe('assistant');
    expect(['end_turn', 'max_tokens']).toContain(message.stop_reason);
    expect(message.stop_sequence).toBeNull();
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    expect(message.usage.input_tokens).toBe(call.promptIds.length);
    expect(message.usage.output_tokens).toBe(call.generatedIds.length);
    const text = message.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
    expect(text).toBe(call.assistantMessage?.content ?? '');
  });

  it('streams with messages.stream: the final message equals what was recorded', async () => {
    const episode = await peer.startEpisode();
    const stream = anthropicFor(episode).messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'count' }] });
    let deltas = 0;
    stream.on('text', () => (deltas += 1));
    const final = await stream.finalMessage();
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    expect(final.usage.input_tokens).toBe(call.promptIds.length);
    expect(final.usage.output_tokens).toBe(call.generatedIds.length);
    const text = final.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
    expect(text).toBe(call.assistantMessage?.content ?? '');
    if (text !== '') expect(deltas).toBeGreaterThan(0);
  });

  it('runs a tool_use → tool_result round trip whose calls merge into one timeline', async () => {
    // Greedy through the episode's sampling (SDK 1.x no longer sends temperature).
    const episode = await peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });
    const client = anthropicFor(episode);
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'What is 51-52?' }];
    // Greedy, the warm-started model mostly answers directly; tool_choice any makes the first turn a call.
    const first = await client.messages.create({ model: 'tiny', max_tokens: 64, system: 'Use calc.', tools: [CALC_TOOL], tool_choice: { type: 'any' }, messages });
    expect(first.stop_reason).toBe('tool_use');
    const toolUse = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(toolUse.name).toBe('calc');
    expect(typeof toolUse.input).toBe('object');
    messages.push({ role: 'assistant', content: first.content });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUse.id, content: '-1' }] });
    const second = await client.messages.create({ model: 'tiny', max_tokens: 16, system: 'Use calc.', tools: [CALC_TOOL], messages });
    messages.push({ role: 'assistant', content: second.content });
    messages.push({ role: 'user', content: 'And 2+2?' });
    await client.messages.create({ model: 'tiny', max_tokens: 16, system: 'Use calc.', tools: [CALC_TOOL], messages });

    const calls = getCalls(peer.runtime.db, episode.episodeId);
    expect(calls).toHaveLength(3);
    expect(calls[1].messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: toolUse.id, content: '-1' });
    expect(calls[1].splice.turns[0]).toMatchObject({ callId: calls[0].callId, outcome: 'spliced' });
    const ended = await peer.swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 1 });
    expect(ended.status).toBe(200);
    expect(ended.body.timelines).toBe(1);
    expect(getTimelines(peer.runtime.db, episode.episodeId)!.timelines).toHaveLength(1);
  });

  it("lists the models in Anthropic's shape for Anthropic's client", async () => {
    const episode = await peer.startEpisode();
    const ids: string[] = [];
    for await (const model of anthropicFor(episode).models.list()) ids.push(model.id);
    expect(ids).toEqual(['tiny', 'gpt-4o-mini', 'claude-sonnet-4-5']);
  });

  it('counts tokens as the call renders them, and records nothing', async () => {
    const episode = await peer.startEpisode();
    const client = anthropicFor(episode);
    const body = { model: 'tiny', system: 'Use calc.', tools: [CALC_TOOL], messages: [{ role: 'user' as const, content: 'What is 3*4?' }] };
    const counted = await client.messages.countTokens(body);
    expect(getCalls(peer.runtime.db, episode.episodeId)).toHaveLength(0);
    const created = await client.messages.create({ ...body, max_tokens: 2 });
    expect(counted.input_tokens).toBe(created.usage.input_tokens);
  });

  it('ends before a stop sequence, removes it from the text and names it', async () => {
    const episode = await peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });
    const client = anthropicFor(episode);
    const ask = (stop_sequences?: string[]) =>
      client.messages.create({ model: 'tiny', max_tokens: 24, messages: [{ role: 'user', content: 'What is 7+8?' }], stop_sequences });
    const textOf = (m: Anthropic.Message) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
    const full = textOf(await ask());
    const stopAt = [...full].slice(1).find((ch) => ch.trim() !== '' && ch !== '\uFFFD');
    expect(stopAt, 'the greedy answer has a visible character after its first').toBeDefined();
    // More than Anthropic's old cap of 4 stop sequences is fine.
    const stopped = await ask(['\u0001', '\u0002', '\u0003', '\u0004', stopAt!]);
    expect(stopped.stop_reason).toBe('stop_sequence');
    expect(stopped.stop_sequence).toBe(stopAt);
    expect(textOf(stopped)).toBe(full.slice(0, full.indexOf(stopAt!)).trim());
  });
});

describe('messages as Claude Code and curl send them', () => {
  it('accepts x-api-key, ?beta=true, anthropic-beta, system blocks with cache_control, mid-conversation system, untyped tools, adaptive thinking and a max_tokens over the context', async () => {
    const episode = await peer.startEpisode();
    const res = await post(
      '/v1/messages?beta=true',
      {
        model: 'tiny',
        max_tokens: 32000,
        stream: false,
        temperature: 0.5,
        top_p: 0.9,
        top_k: 40,
        system: [
          { type: 'text', text: 'You are an agent.', cache_control: { type: 'ephemeral' } },
          { type: 'text', text: 'Be brief.' },
        ],
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
          { role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
          { role: 'system', content: 'reminder: stay on task' },
          { role: 'user', content: 'go' },
        ],
        tools: [{ name: 'Read', description: 'read a file', input_schema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' }, defer_loading: true }, { type: 'web_search_20250305', name: 'web_search' }],
        thinking: { type: 'adaptive' },
        metadata: { user_id: 'u1' },
        context_management: { edits: [] },
        output_config: { effort: 'low' },
      },
      { 'x-api-key': episode.apiKey, 'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14' },
    );
    expect(res.status).toBe(200);
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    expect(call.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'system', 'user']);
    expect(call.messages[0].content).toBe('You are an agent.\nBe brief.');
    expect(call.tools?.map((t) => t.function.name)).toEqual(['Read']);
  });

  it('names every SSE frame by its data type, in Anthropic\'s order, with output_tokens as the total', async () => {
    const episode = await peer.startEpisode();
    const res = await post('/v1/messages', { model: 'tiny', max_tokens: 8, stream: true, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': episode.apiKey });
    expect(res.status).toBe(200);
    const all = frames(res.text);
    for (const frame of all) expect(frame.event).toBe(frame.data.type);
    const types = all.map((f) => f.data.type);
    expect(types.slice(0, 2)).toEqual(['message_start', 'ping']);
    expect(types.slice(-2)).toEqual(['message_delta', 'message_stop']);
    const start = all[0].data as unknown as { message: { content: unknown[]; usage: { input_tokens: number } } };
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    expect(start.message.content).toEqual([]);
    expect(start.message.usage.input_tokens).toBe(call.promptIds.length);
    const delta = all.at(-2)!.data as unknown as { usage: { output_tokens: number }; delta: { stop_reason: string; stop_sequence: null } };
    expect(delta.usage.output_tokens).toBe(call.generatedIds.length);
    expect(['end_turn', 'max_tokens']).toContain(delta.delta.stop_reason);
    expect(delta.delta.stop_sequence).toBeNull();
    // Blocks open and close in pairs, deltas only inside them.
    let open: number | null = null;
    for (const { data } of all) {
      if (data.type === 'content_block_start') open = data.index as number;
      if (data.type === 'content_block_delta') expect(data.index).toBe(open);
      if (data.type === 'content_block_stop') open = null;
    }
    expect(open).toBeNull();
  });

  it('renders the same conversation to the same prompt ids as chat completions', async () => {
    const episode = await peer.startEpisode();
    await new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 }).chat.completions.create({
      model: 'tiny',
      max_tokens: 2,
      tools: [{ type: 'function', function: { name: 'calc', description: 'Evaluate arithmetic', parameters: CALC_TOOL.input_schema as Record<string, unknown> } }],
      messages: [
        { role: 'system', content: 'Use calc.' },
        { role: 'user', content: 'What is 2*3?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'calc', arguments: '{"expr":"2*3"}' } }] },
        { role: 'tool', tool_call_id: 'toolu_1', content: '6' },
      ],
    });
    await anthropicFor(episode).messages.create({
      model: 'tiny',
      max_tokens: 2,
      system: 'Use calc.',
      tools: [CALC_TOOL],
      messages: [
        { role: 'user', content: 'What is 2*3?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'calc', input: { expr: '2*3' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '6' }] },
      ],
    });
    const [chat, messages] = getCalls(peer.runtime.db, episode.episodeId);
    expect(messages.promptIds).toEqual(chat.promptIds);
  });
});

describe("errors in Anthropic's shape, and nothing recorded", () => {
  it('answers bad input, bad keys, unknown models and unknown routes with the matching type', async () => {
    const episode = await peer.startEpisode();
    const key = { 'x-api-key': episode.apiKey };
    const cases: { path?: string; body: unknown; headers?: Record<string, string>; status: number; type: string }[] = [
      { body: '{"model": "tiny", "messages": [', headers: key, status: 400, type: 'invalid_request_error' },
      { body: { model: 'tiny', messages: [{ role: 'user', content: 'x' }] }, headers: key, status: 400, type: 'invalid_request_error' },
      { body: { model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, headers: key, status: 400, type: 'invalid_request_error' },
      { body: { model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }, status: 401, type: 'authentication_error' },
      { body: { model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }, headers: { 'x-api-key': 'sk-ant-nope' }, status: 401, type: 'authentication_error' },
      { body: { model: 'claude-opus-4', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }, headers: key, status: 404, type: 'not_found_error' },
      { path: '/v1/messages/batches?beta=true', body: {}, headers: key, status: 404, type: 'not_found_error' },
      { path: '/v1/messages/count_tokens', body: { model: 'tiny' }, headers: key, status: 400, type: 'invalid_request_error' },
      { body: { model: 'tiny', max_tokens: 4, messages: [{ role: 'user', content: 'x'.repeat(20_000) }] }, headers: key, status: 400, type: 'invalid_request_error' },
    ];
    for (const c of cases) {
      const res = await post(c.path ?? '/v1/messages', c.body, c.headers);
      expect({ status: res.status, body: res.json() }).toMatchObject({ status: c.status, body: { type: 'error', error: { type: c.type } } });
    }
    const get = await fetch(`${peer.origin}/v1/messages`, { headers: key });
    expect(get.status).toBe(405);
    expect(((await get.json()) as AnthropicErrorBody).type).toBe('error');
    expect(getCalls(peer.runtime.db, episode.episodeId)).toHaveLength(0);
  });

  it('maps to the SDK\'s error classes: a dead key is not retried, an updating model is overloaded', async () => {
    const episode = await peer.startEpisode();
    let sent = 0;
    const counting: typeof fetch = (input, init) => {
      sent += 1;
      return fetch(input, init);
    };
    const dead = await new Anthropic({ baseURL: peer.origin, apiKey: 'sk-ant-nope', maxRetries: 3, fetch: counting })
      .messages.create({ model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(dead).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(sent).toBe(1);

    const model = peer.runtime.serving.models.models[0];
    model.setState('updating');
    try {
      const res = await post('/v1/messages', { model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': episode.apiKey });
      expect(res.status).toBe(503);
      expect(res.json().error.type).toBe('overloaded_error');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      model.resume();
    }
    expect(getCalls(peer.runtime.db, episode.episodeId)).toHaveLength(0);
  });
});
