/**
 * The gateway end to end: a real peer (PeerRuntime, SQLite store, builtin:tiny in a worker thread) driven over HTTP
 * by the official `openai` client, the Vercel AI SDK and @openai/agents, with only baseURL and apiKey set.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled } from '@openai/agents';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateEpisodeResponse, SwarmStatusResponse } from '../../common/swarm-api.ts';
import { mintClientKey, mintEpisodeKey } from '../episodes/keys.ts';
import { PeerRuntime } from '../runtime.ts';
import { getCalls, getEpisode, getTimelines } from '../store/episode-reads.ts';

let runtime: PeerRuntime;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentjet-gateway-'));
  runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: ['gpt-4o-mini'], poolLimit: 64 }],
  });
  expect(runtime.serving.models.models[0].error).toBeUndefined();
});

afterAll(async () => {
  await runtime?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

function swarmUrl(path: string) {
  return `http://127.0.0.1:${runtime.port}/swarm/v1${path}`;
}

async function swarmPost(path: string, body: unknown) {
  const res = await fetch(swarmUrl(path), {
    method: 'POST',
    headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function startEpisode(extra: Record<string, unknown> = {}): Promise<CreateEpisodeResponse> {
  const res = await swarmPost('/episodes', { model: 'tiny', taskId: 'task-1', sampling: { max_tokens: 6 }, ...extra });
  expect(res.status).toBe(201);
  return res.body as unknown as CreateEpisodeResponse;
}

function clientFor(episode: CreateEpisodeResponse) {
  return new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });
}

describe('chat completions with the openai client', () => {
  it('answers a plain call and records it as a call of the episode', async () => {
    const episode = await startEpisode();
    const completion = await clientFor(episode).chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: [{ type: 'text', text: 'hello' }] }],
      max_tokens: 5,
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.choices).toHaveLength(1);
    expect(['stop', 'length']).toContain(completion.choices[0].finish_reason);
    expect(typeof completion.choices[0].message.content).toBe('string');
    expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
    expect(completion.usage!.completion_tokens).toBeLessThanOrEqual(5);
    const calls = getCalls(runtime.db, episode.episodeId);
    expect(calls).toHaveLength(1);
    expect(calls[0].generatedIds).toHaveLength(completion.usage!.completion_tokens);
    expect(calls[0].promptIds).toHaveLength(completion.usage!.prompt_tokens);
  });

  it('streams token by token, ends with usage and [DONE], and matches what was recorded', async () => {
    const episode = await startEpisode();
    const stream = await clientFor(episode).chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'count' }],
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let chunks = 0;
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        content += choice.delta.content ?? '';
        finish = choice.finish_reason ?? finish;
      }
    }
    expect(finish).not.toBeNull();
    expect(usage!.completion_tokens).toBeGreaterThan(0);
    // One role chunk, one per visible piece, one finish chunk, one usage chunk: several, not one blob.
    expect(chunks).toBeGreaterThan(3);
    const [call] = getCalls(runtime.db, episode.episodeId);
    expect(call.generatedIds).toHaveLength(usage!.completion_tokens);
    expect(call.assistantMessage?.content ?? '').toBe(content);
  });

  it('samples n choices, each recorded as its own call', async () => {
    const episode = await startEpisode();
    const completion = await clientFor(episode).chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'pick' }],
      n: 3,
      max_tokens: 4,
      seed: 7,
    });
    expect(completion.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(3);
  });

  it('returns logprobs and top_logprobs for every visible token', async () => {
    const episode = await startEpisode();
    const completion = await clientFor(episode).chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 4,
      logprobs: true,
      top_logprobs: 3,
    });
    const entries = completion.choices[0].logprobs!.content!;
    expect(entries.length).toBeGreaterThan(0);
    for (const entry of entries) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.top_logprobs).toHaveLength(3);
    }
    const [call] = getCalls(runtime.db, episode.episodeId);
    expect(entries[0].logprob).toBeCloseTo(call.logprobs[0], 4);
  });

  it('samples greedily at temperature 0 in an eval episode (the client\'s parameters)', async () => {
    const episode = await startEpisode({ kind: 'eval' });
    const ask = () =>
      clientFor(episode).chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'same' }], max_tokens: 5, temperature: 0, logprobs: true });
    const [a, b] = [await ask(), await ask()];
    expect(a.choices[0].message.content).toBe(b.choices[0].message.content);
    const [first, second] = getCalls(runtime.db, episode.episodeId);
    expect(second.generatedIds).toEqual(first.generatedIds);
  });

  it('ends output before a stop string', async () => {
    const episode = await startEpisode();
    const client = clientFor(episode);
    const ask = (seed: number, stop?: string) =>
      client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 's' }], max_tokens: 12, seed, stop });
    // The same seed gives the same tokens; find a seeded answer with a visible character after its start to stop at.
    for (let seed = 1; seed <= 20; seed++) {
      const text = (await ask(seed)).choices[0].message.content ?? '';
      const stopAt = [...text].slice(1).find((ch) => ch.trim() !== '' && ch !== '\uFFFD');
      if (!stopAt) continue;
      const stopped = await ask(seed, stopAt);
      expect(stopped.choices[0].message.content).toBe(text.slice(0, text.indexOf(stopAt)));
      expect(stopped.choices[0].finish_reason).toBe('stop');
      return;
    }
    throw new Error('no seed gave a visible character to stop at');
  });
});

describe('tools', () => {
  const tools: OpenAI.ChatCompletionTool[] = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } },
  ];
  const history: OpenAI.ChatCompletionMessageParam[] = [
    { role: 'user', content: 'weather in Oslo?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: 'cold, -3 C' },
  ];
  const promptText = (episodeId: string, index: number) => runtime.serving.models.models[0].tokenizer.decode(getCalls(runtime.db, episodeId)[index].promptIds);

  it('renders tools, earlier tool calls and tool results into the prompt', async () => {
    const episode = await startEpisode();
    await clientFor(episode).chat.completions.create({ model: 'tiny', messages: history, tools, max_tokens: 3 });
    const text = promptText(episode.episodeId, 0);
    expect(text).toContain('"get_weather"');
    expect(text).toContain('<tool_call>');
    expect(text).toContain('"Oslo"');
    expect(text).toContain('<tool_response>\ncold, -3 C\n</tool_response>');
  });

  it("hides the tools with tool_choice 'none' and forces the named function's call", async () => {
    const episode = await startEpisode();
    const client = clientFor(episode);
    await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], tools, tool_choice: 'none', max_tokens: 2 });
    await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'hi' }],
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 2,
    });
    expect(promptText(episode.episodeId, 0)).not.toContain('get_weather');
    expect(promptText(episode.episodeId, 1).endsWith('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": ')).toBe(true);
  });

  it('refuses tool_choice naming a function that is not in tools', async () => {
    const episode = await startEpisode();
    const err = await clientFor(episode)
      .chat.completions.create({ model: 'tiny', messages: history, tools, tool_choice: { type: 'function', function: { name: 'nope' } } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('tool_choice');
  });
});

describe('errors in OpenAI shape, and nothing stored', () => {
  const url = () => `http://127.0.0.1:${runtime.port}/v1/chat/completions`;
  const post = async (key: string | null, body: string) => {
    const res = await fetch(url(), { method: 'POST', headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), 'content-type': 'application/json' }, body });
    return { status: res.status, headers: res.headers, body: (await res.json()) as { error: { type: string; param: string | null; code: string | null; message: string } } };
  };
  const good = JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });

  it('answers bad input with 400 naming the field, and records no call', async () => {
    const episode = await startEpisode();
    const malformed = await post(episode.apiKey, '{"model": "tiny", "messages": [');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error.type).toBe('invalid_request_error');
    const wrongType = await post(episode.apiKey, JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], temperature: 'hot' }));
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.error.param).toBe('temperature');
    const noMessages = await post(episode.apiKey, JSON.stringify({ model: 'tiny', messages: 'hi' }));
    expect(noMessages.body.error.param).toBe('messages');
    const badRole = await post(episode.apiKey, JSON.stringify({ model: 'tiny', messages: [{ role: 'robot', content: 'x' }] }));
    expect(badRole.status).toBe(400);
    expect(badRole.body.error.param).toMatch(/^messages\.0/);
    const tooLarge = await post(episode.apiKey, JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x'.repeat(9 * 1024 * 1024) }] }));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error.code).toBe('request_too_large');
    expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(0);
  });

  it("answers an unknown model with 404 naming the episode's model and aliases", async () => {
    const episode = await startEpisode();
    const res = await post(episode.apiKey, JSON.stringify({ model: 'gpt-5', messages: [{ role: 'user', content: 'x' }] }));
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('model_not_found');
    expect(res.body.error.param).toBe('model');
    expect(res.body.error.message).toContain('"tiny"');
    expect(res.body.error.message).toContain('gpt-4o-mini');
    expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(0);
  });

  it("answers to the episode's own aliases, and only in that episode", async () => {
    const episode = await startEpisode({ aliases: ['my-model'] });
    const ok = await post(episode.apiKey, JSON.stringify({ model: 'my-model', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }));
    expect(ok.status).toBe(200);
    expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(1);

    const unknown = await post(episode.apiKey, JSON.stringify({ model: 'claude-3', messages: [{ role: 'user', content: 'x' }] }));
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('model_not_found');
    expect(unknown.body.error.message).toContain('"tiny"');
    expect(unknown.body.error.message).toContain('gpt-4o-mini');
    expect(unknown.body.error.message).toContain('my-model');

    const other = await startEpisode();
    const elsewhere = await post(other.apiKey, JSON.stringify({ model: 'my-model', messages: [{ role: 'user', content: 'x' }] }));
    expect(elsewhere.status).toBe(404);
    expect(elsewhere.body.error.message).toContain('(or an alias: gpt-4o-mini)');
  });

  it('refuses malformed episode aliases with 400', async () => {
    for (const aliases of [[''], Array.from({ length: 17 }, (_, i) => `m${i}`), 'my-model']) {
      const res = await swarmPost('/episodes', { model: 'tiny', taskId: 'bad-aliases', aliases });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ name: 'InvalidRequestError', field: expect.stringMatching(/^aliases/) });
    }
  });

  it('refuses missing, forged and expired keys with 401', async () => {
    const episode = await startEpisode();
    const forged = mintEpisodeKey('ab'.repeat(32), episode.episodeId);
    const expired = mintEpisodeKey(runtime.identity.secret, 'ep_from_an_earlier_run');
    for (const key of [null, 'sk-not-a-key', forged, episode.apiKey.slice(0, -2) + 'xx', expired]) {
      const res = await post(key, good);
      expect(res.status).toBe(401);
      expect(res.body.error.type).toBe('authentication_error');
    }
    expect((await post(expired, good)).body.error.code).toBe('expired_api_key');
    const viaClient = await new OpenAI({ baseURL: episode.baseUrl, apiKey: forged, maxRetries: 0 }).models.list().catch((e: unknown) => e);
    expect(viaClient).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(0);
  });

  it('answers 409 once the episode is over, and refuses a late end', async () => {
    const episode = await startEpisode();
    expect((await swarmPost(`/episodes/${episode.episodeId}/abort`, { reason: 'test' })).status).toBe(200);
    const call = await post(episode.apiKey, good);
    expect(call.status).toBe(409);
    expect(call.body.error.code).toBe('episode_not_active');
    const late = await swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 1 });
    expect(late.status).toBe(409);
    expect((late.body.error as { name: string }).name).toBe('ConflictError');
    expect(getEpisode(runtime.db, episode.episodeId)!.state).toBe('aborted');
  });

  it('answers 503 with Retry-After while the model updates', async () => {
    const episode = await startEpisode();
    const model = runtime.serving.models.models[0];
    model.setState('updating');
    try {
      const res = await post(episode.apiKey, good);
      expect(res.status).toBe(503);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(res.body.error.type).toBe('server_error');
    } finally {
      model.resume();
    }
    expect((await post(episode.apiKey, good)).status).toBe(200);
  });
});

describe('episodes', () => {
  it('answers 429 pool_full when the model runs its limit of episodes', async () => {
    const model = runtime.serving.models.models[0];
    const limit = model.pool.limit;
    model.pool.limit = model.pool.active;
    try {
      const res = await swarmPost('/episodes', { model: 'tiny', taskId: 'full' });
      expect(res.status).toBe(429);
      expect((res.body.error as { name: string }).name).toBe('PoolFullError');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      model.pool.limit = limit;
    }
  });

  it('while draining: no new episode (503), the one in flight still calls and ends, then drain resolves', async () => {
    const episode = await startEpisode();
    const model = runtime.serving.models.models[0];
    const others = [...runtime.serving.episodes.activeIds()].filter((id) => id !== episode.episodeId);
    for (const id of others) await swarmPost(`/episodes/${id}/abort`, { reason: 'clearing the pool for the drain test' });
    const drained = model.drain();
    try {
      const refused = await swarmPost('/episodes', { model: 'tiny', taskId: 'late' });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).not.toBeNull();
      await clientFor(episode).chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
      expect((await swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 0.5 })).status).toBe(200);
      await drained;
      expect(model.pool.active).toBe(0);
    } finally {
      model.resume();
    }
  });

  it('aborts an episode with no call for idleTimeoutS, and never trains on it', async () => {
    const outcomes = new Map<string, string>();
    const off = runtime.serving.models.models[0].onEpisodeDone((d) => outcomes.set(d.episodeId, d.outcome));
    const episode = await startEpisode({ idleTimeoutS: 0.2 });
    // Synchronised on the model's own event for this episode, not on a sleep longer than the timeout.
    await expect.poll(() => outcomes.get(episode.episodeId), { timeout: 30_000 }).toBe('aborted');
    off();
    expect(getEpisode(runtime.db, episode.episodeId)!.state).toBe('aborted');
    expect((await swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 1 })).status).toBe(409);
  });

  it('stores an ended episode with its reward, calls and timelines before acknowledging', async () => {
    const episode = await startEpisode({ taskId: 'group-a' });
    const client = clientFor(episode);
    const first = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'one' }], max_tokens: 3 });
    await client.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'one' }, { role: 'assistant', content: first.choices[0].message.content }, { role: 'user', content: 'two' }],
      max_tokens: 3,
    });
    const ended = await swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 0.75, success: true, metrics: { turns: 2 } });
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({ episodeId: episode.episodeId, state: 'ended', calls: 2 });
    const stored = getEpisode(runtime.db, episode.episodeId)!;
    expect(stored).toMatchObject({ state: 'ended', reward: 0.75, success: true, groupId: 'group-a', metrics: { turns: 2 } });
    expect(getTimelines(runtime.db, episode.episodeId)!.timelines.length).toBe(ended.body.timelines);
    // The second prompt holds the first answer with the exact ids generated (spliced), so both calls merge into one timeline.
    const calls = getCalls(runtime.db, episode.episodeId);
    expect(calls[1].splice.turns[0]).toMatchObject({ callId: calls[0].callId, outcome: 'spliced' });
    expect(ended.body.timelines).toBe(1);
  });

  it('reports models, pools and policy versions on /swarm/v1/status and refuses a wrong token', async () => {
    const res = await fetch(swarmUrl('/status'), { headers: { authorization: `Bearer ${runtime.token}` } });
    const status = (await res.json()) as SwarmStatusResponse;
    expect(status.models[0]).toMatchObject({ name: 'tiny', aliases: ['gpt-4o-mini'], policyVersion: 0 });
    expect(['idle', 'rolling']).toContain(status.models[0].engineState);
    const clientKey = mintClientKey(runtime.identity.secret, 'runner-1');
    expect((await fetch(swarmUrl('/status'), { headers: { authorization: `Bearer ${clientKey}` } })).status).toBe(200);
    expect((await fetch(swarmUrl('/status'), { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
  });
});

describe('other clients, unchanged', () => {
  it('Vercel AI SDK (openai-compatible provider) completes a call', async () => {
    const episode = await startEpisode();
    const provider = createOpenAICompatible({ name: 'agentjet', baseURL: episode.baseUrl, apiKey: episode.apiKey });
    const result = await generateText({ model: provider.chatModel('tiny'), prompt: 'hello', maxOutputTokens: 4, maxRetries: 0 });
    expect(typeof result.text).toBe('string');
    expect(result.usage.outputTokens).toBeGreaterThan(0);
    const streamed = streamText({ model: provider.chatModel('tiny'), prompt: 'hello', maxOutputTokens: 4, maxRetries: 0 });
    expect(typeof (await streamed.text)).toBe('string');
    expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(2);
  });

  it('@openai/agents (chat completions) runs an agent turn', async () => {
    const episode = await startEpisode();
    setTracingDisabled(true);
    const model = new OpenAIChatCompletionsModel(new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 }), 'tiny');
    const agent = new Agent({ name: 'tester', instructions: 'answer briefly', model, modelSettings: { maxTokens: 4 } });
    const result = await run(agent, 'hello');
    expect(typeof result.finalOutput).toBe('string');
    expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(1);
  });

  it('LangChain (ChatOpenAI) invokes, streams, and sends bound tools', async () => {
    const episode = await startEpisode();
    const options = { model: 'tiny', apiKey: episode.apiKey, configuration: { baseURL: episode.baseUrl }, maxRetries: 0 };
    const chat = new ChatOpenAI({ ...options, maxTokens: 4 });
    const answer = await chat.invoke('hello');
    expect(typeof answer.content).toBe('string');
    expect(answer.usage_metadata?.output_tokens).toBeGreaterThan(0);
    let streamed = '';
    for await (const chunk of await chat.stream('hello')) streamed += String(chunk.content);
    expect(streamed).toBe(getCalls(runtime.db, episode.episodeId)[1].assistantMessage?.content);
    // Tools bound through LangChain reach the prompt; a named tool_choice is accepted.
    const calc = {
      type: 'function' as const,
      function: { name: 'calc', description: 'Evaluate arithmetic', parameters: { type: 'object', properties: { expr: { type: 'string' } } } },
    };
    await new ChatOpenAI({ ...options, maxTokens: 8 })
      .bindTools([calc], { tool_choice: { type: 'function', function: { name: 'calc' } } })
      .invoke('What is 12*34?');
    const toolCall = getCalls(runtime.db, episode.episodeId)[2];
    expect(toolCall.tools?.map((t) => t.function.name)).toEqual(['calc']);
    expect(toolCall.messages.at(-1)).toMatchObject({ role: 'user', content: 'What is 12*34?' });
  });
});
