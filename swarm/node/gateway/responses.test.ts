/**
 * OpenAI's Responses API end to end: a real peer with builtin:tiny, driven by the official `openai` client
 * (`responses.create`, streamed and not), `@openai/agents` in its default (Responses) mode, and Codex-shaped
 * requests over fetch. Greedy eval episodes make the warm-started model's answers repeatable.
 */
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { getCalls } from '../store/episode-reads.ts';
import { startTestPeer, type TestPeer } from './testing/peer.ts';

let peer: TestPeer;
beforeAll(async () => {
  peer = await startTestPeer();
});
afterAll(async () => peer?.stop());

const openaiFor = (episode: CreateEpisodeResponse) => new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });
const greedy = () => peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });

const CALC: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'calc',
  description: 'Evaluate arithmetic',
  parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
  strict: false,
};

type Frame = { event: string; data: { type: string; sequence_number: number } & Record<string, unknown> };

async function postStream(episode: CreateEpisodeResponse, body: Record<string, unknown>): Promise<{ status: number; frames: Frame[] }> {
  const res = await fetch(`${episode.baseUrl}/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json', 'accept-encoding': 'zstd,gzip' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  const frames = text
    .split('\n\n')
    .filter((f) => f.trim() !== '')
    .map((f) => ({ event: /^event: (.*)$/m.exec(f)![1], data: JSON.parse(/^data: (.*)$/m.exec(f)![1]) as Frame['data'] }));
  return { status: res.status, frames };
}

/** The Responses stream's rules: names equal types, sequence numbers increase, items open before their deltas. */
function expectWellFormed(frames: Frame[]) {
  frames.forEach((f, i) => {
    expect(f.event).toBe(f.data.type);
    expect(f.data.sequence_number).toBe(i);
  });
  expect(frames.slice(0, 2).map((f) => f.data.type)).toEqual(['response.created', 'response.in_progress']);
  expect((frames[0].data.response as { output: unknown[] }).output).toEqual([]);
  const announced = new Set<string>();
  for (const { data } of frames) {
    if (data.type === 'response.output_item.added') announced.add((data.item as { id: string }).id);
    if (data.type === 'response.content_part.added') expect(announced.has(data.item_id as string)).toBe(true);
    if (data.type === 'response.output_text.delta' || data.type === 'response.function_call_arguments.delta') expect(announced.has(data.item_id as string)).toBe(true);
  }
  const last = frames.at(-1)!.data;
  const status = (last.response as { status: string }).status;
  expect(last.type).toBe(`response.${status}`);
}

describe('responses with the official openai client', () => {
  it('answers a string input with instructions; usage is what was recorded', async () => {
    const episode = await peer.startEpisode();
    const response = await openaiFor(episode).responses.create({ model: 'tiny', instructions: 'be brief', input: 'hello', max_output_tokens: 6, store: false, include: [], prompt_cache_key: 'k', metadata: { run: '1' } });
    expect(response.object).toBe('response');
    expect(['completed', 'incomplete']).toContain(response.status);
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    expect(call.messages).toEqual([{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello' }]);
    expect(response.usage!.input_tokens).toBe(call.promptIds.length);
    expect(response.usage!.output_tokens).toBe(call.generatedIds.length);
    expect(response.usage!.output_tokens).toBeGreaterThan(0);
    expect(response.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(0);
    expect(response.usage!.output_tokens_details.reasoning_tokens).toBe(0);
    expect(response.output_text).toBe(call.assistantMessage?.content ?? '');
    expect(response.metadata).toEqual({ run: '1' });
  });

  it('streams the real event sequence, and the SDK assembles the same response', async () => {
    const episode = await peer.startEpisode();
    const { status, frames } = await postStream(episode, { model: 'tiny', input: 'hi', max_output_tokens: 8 });
    expect(status).toBe(200);
    expectWellFormed(frames);
    const stream = openaiFor(episode).responses.stream({ model: 'tiny', input: 'hi', max_output_tokens: 8 });
    let deltas = '';
    stream.on('response.output_text.delta', (e) => (deltas += e.delta));
    const final = await stream.finalResponse();
    const calls = getCalls(peer.runtime.db, episode.episodeId);
    expect(final.usage!.output_tokens).toBe(calls[1].generatedIds.length);
    expect(final.output_text).toBe(calls[1].assistantMessage?.content ?? '');
    expect(deltas).toBe(final.output_text);
  });

  it('marks an answer cut at max_output_tokens incomplete (no minimum of 16), streamed too', async () => {
    const episode = await greedy();
    const client = openaiFor(episode);
    const full = await client.responses.create({ model: 'tiny', input: 'What is 7+8?', max_output_tokens: 32 });
    expect(full.usage!.output_tokens, 'precondition: the greedy answer is longer than one token').toBeGreaterThan(1);
    const cut = await client.responses.create({ model: 'tiny', input: 'What is 7+8?', max_output_tokens: 1 });
    expect(cut.status).toBe('incomplete');
    expect(cut.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(cut.output.find((i) => i.type === 'message')).toMatchObject({ status: 'incomplete' });
    const { frames } = await postStream(episode, { model: 'tiny', input: 'What is 7+8?', max_output_tokens: 1 });
    expectWellFormed(frames);
    expect(frames.at(-1)!.data.type).toBe('response.incomplete');
  });

  it('runs a two-turn function-calling loop, stateless or chained by previous_response_id: one timeline, the same prompt', async () => {
    const question: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'What is 51-52?' }];
    const loop = async (chain: boolean) => {
      const episode = await greedy();
      const client = openaiFor(episode);
      // Greedy, the warm-started model mostly answers directly; tool_choice required makes the first turn a call.
      const first = await client.responses.create({ model: 'tiny', instructions: 'Use calc.', input: question, tools: [CALC], tool_choice: 'required', max_output_tokens: 64 });
      const call = first.output.find((i): i is OpenAI.Responses.ResponseFunctionToolCall => i.type === 'function_call')!;
      expect(call.name).toBe('calc');
      const result: OpenAI.Responses.ResponseInputItem = { type: 'function_call_output', call_id: call.call_id, output: '-1' };
      const second = chain
        ? // Chained: only the new item; the earlier turns come from the episode's record.
          await client.responses.create({ model: 'tiny', instructions: 'Use calc.', previous_response_id: first.id, input: [result], tools: [CALC], max_output_tokens: 16 })
        : // Stateless: the whole history sent back, output items as returned (ids and statuses included).
          await client.responses.create({ model: 'tiny', instructions: 'Use calc.', input: [...question, ...(first.output as OpenAI.Responses.ResponseInput), result], tools: [CALC], max_output_tokens: 16 });
      expect(second.previous_response_id).toBe(chain ? first.id : null);
      const calls = getCalls(peer.runtime.db, episode.episodeId);
      expect(calls[1].splice.turns[0]).toMatchObject({ callId: calls[0].callId, outcome: 'spliced' });
      const ended = await peer.swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 1 });
      expect(ended.body.timelines).toBe(1);
      return calls[1].promptIds;
    };
    expect(await loop(true)).toEqual(await loop(false));
  });

  it('refuses an unknown previous_response_id (404) and another episode\'s (400)', async () => {
    const episode = await peer.startEpisode();
    const other = await peer.startEpisode();
    const theirs = await openaiFor(other).responses.create({ model: 'tiny', input: 'x', max_output_tokens: 2 });
    const unknown = await openaiFor(episode).responses.create({ model: 'tiny', input: 'x', previous_response_id: 'resp_nope' }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    const foreign = await openaiFor(episode).responses.create({ model: 'tiny', input: 'x', previous_response_id: theirs.id }).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(OpenAI.BadRequestError);
    expect((foreign as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('previous_response_id');
    expect(getCalls(peer.runtime.db, episode.episodeId)).toHaveLength(0);
  });
});

describe('responses as Codex sends them', () => {
  it('takes developer input_text messages, item ids, namespace and hosted tools, reasoning summary, store false, include', async () => {
    const episode = await peer.startEpisode();
    const { status, frames } = await postStream(episode, {
      model: 'tiny',
      input: [
        { type: 'message', id: 'item_1', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
        { type: 'message', id: 'item_2', role: 'user', content: [{ type: 'input_text', text: 'list files' }] },
      ],
      tools: [
        { type: 'function', name: 'shell', description: 'run a command', parameters: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { cmd: { type: 'string' } } }, strict: false },
        { type: 'namespace', name: 'mcp', tools: [{ type: 'function', name: 'read_file', parameters: { type: 'object' } }] },
        { type: 'web_search' },
      ],
      tool_choice: 'auto',
      parallel_tool_calls: false,
      reasoning: { summary: 'auto' },
      store: false,
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: 'thread-1',
      client_metadata: { originator: 'codex_cli_rs' },
      text: { format: { type: 'text' }, verbosity: 'low' },
      max_output_tokens: 6,
    });
    expect(status).toBe(200);
    expectWellFormed(frames);
    expect((frames.at(-1)!.data.response as { id: string }).id).toMatch(/^resp_/);
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    expect(call.messages).toEqual([{ role: 'system', content: 'You are Codex.' }, { role: 'user', content: 'list files' }]);
    expect(call.tools?.map((t) => t.function.name)).toEqual(['shell', 'read_file']);
  });

  it('reports a prompt over the context as response.failed context_length_exceeded when streaming, a 400 otherwise', async () => {
    const episode = await peer.startEpisode();
    const huge = 'x'.repeat(20_000);
    const { status, frames } = await postStream(episode, { model: 'tiny', input: huge });
    expect(status).toBe(200);
    expect(frames.at(-1)!.data).toMatchObject({ type: 'response.failed', response: { status: 'failed', error: { code: 'context_length_exceeded' } } });
    frames.forEach((f, i) => expect(f.data.sequence_number).toBe(i));
    const err = await openaiFor(episode).responses.create({ model: 'tiny', input: huge }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).toBe('context_length_exceeded');
    expect(getCalls(peer.runtime.db, episode.episodeId)).toHaveLength(0);
  });
});

describe('@openai/agents in its default (Responses) mode', () => {
  it('runs an agent with a function tool: the tool runs, and every call is recorded', async () => {
    const episode = await greedy();
    setTracingDisabled(true);
    let ran = 0;
    const calc = tool({
      name: 'calc',
      description: 'Evaluate arithmetic',
      parameters: z.object({ expr: z.string() }),
      execute: ({ expr }) => {
        ran += 1;
        return `result of ${expr}`;
      },
    });
    // The SDK's defaults: a model given by name, served through the Responses API by the default client.
    const paths: string[] = [];
    const recording: typeof fetch = (input, init) => {
      paths.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
      return fetch(input, init);
    };
    setDefaultOpenAIClient(new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0, fetch: recording }));
    // tool_choice required on the first turn; the SDK resets it to auto after a tool call.
    const agent = new Agent({ name: 'calculator', instructions: 'Use calc.', model: 'tiny', tools: [calc], modelSettings: { toolChoice: 'required', maxTokens: 48 } });
    const result = await run(agent, 'What is 51-52?', { maxTurns: 6 });
    expect(typeof result.finalOutput).toBe('string');
    expect(ran).toBeGreaterThan(0);
    const calls = getCalls(peer.runtime.db, episode.episodeId);
    expect(calls.length).toBe(ran + 1);
    expect(new Set(paths)).toEqual(new Set(['/v1/responses']));
    expect(calls[1].messages.some((m) => m.role === 'tool')).toBe(true);
  });
});

describe('one recording path', () => {
  it('renders the same tool-using conversation to the same prompt ids through chat completions, Responses and Messages', async () => {
    const episode = await peer.startEpisode();
    const parameters = CALC.parameters as Record<string, unknown>;
    await openaiFor(episode).chat.completions.create({
      model: 'tiny',
      max_tokens: 2,
      tools: [{ type: 'function', function: { name: 'calc', description: 'Evaluate arithmetic', parameters } }],
      messages: [
        { role: 'system', content: 'Use calc.' },
        { role: 'user', content: 'What is 2*3?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'calc', arguments: '{"expr":"2*3"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '6' },
      ],
    });
    await openaiFor(episode).responses.create({
      model: 'tiny',
      max_output_tokens: 2,
      instructions: 'Use calc.',
      tools: [CALC],
      input: [
        { role: 'user', content: 'What is 2*3?' },
        { type: 'function_call', call_id: 'call_1', name: 'calc', arguments: '{"expr":"2*3"}' },
        { type: 'function_call_output', call_id: 'call_1', output: '6' },
      ],
    });
    await new Anthropic({ baseURL: peer.origin, apiKey: episode.apiKey, maxRetries: 0 }).messages.create({
      model: 'tiny',
      max_tokens: 2,
      system: 'Use calc.',
      tools: [{ name: 'calc', description: 'Evaluate arithmetic', input_schema: parameters as Anthropic.Tool['input_schema'] }],
      messages: [
        { role: 'user', content: 'What is 2*3?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'calc', input: { expr: '2*3' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: '6' }] },
      ],
    });
    const [chat, responses, messages] = getCalls(peer.runtime.db, episode.episodeId);
    expect(responses.promptIds).toEqual(chat.promptIds);
    expect(messages.promptIds).toEqual(chat.promptIds);
  });
});
