/**
 * A client that hangs up mid-answer: generation stops, the call joins no timeline, and the episode counts it.
 * A randomly initialised model under greedy sampling runs to max_tokens (checked first), so the hang-up always
 * lands while the answer is still being generated.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type { DecoderConfig } from '../../../worker/common/engine.ts';
import { createEngineFromWeights } from '../../../worker/engine.ts';
import { initWeights } from '../../../worker/model.ts';
import type { CreateEpisodeResponse } from '../../common/swarm-api.ts';
import { PeerRuntime } from '../runtime.ts';
import { getCalls, getEpisode } from '../store/episode-reads.ts';

const MODEL: DecoderConfig = {
  model_type: 'qwen3',
  vocab_size: 264,
  hidden_size: 32,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
  intermediate_size: 64,
  max_position_embeddings: 4096,
  rope_theta: 10000,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  qk_norm: false,
  attention_bias: false,
};

let runtime: PeerRuntime;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'agentjet-hang-up-'));
  const weights = initWeights(MODEL, 7);
  runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'silent',
    models: [{ name: 'random', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 4 }],
    startEngine: () => createEngineFromWeights({ name: 'random', config: MODEL, weights, tokenizer: null }),
  });
});

afterAll(async () => {
  await runtime?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function swarmPost(path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`http://127.0.0.1:${runtime.port}/swarm/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.ok).toBe(true);
  return (await res.json()) as Record<string, unknown>;
}

const request = {
  model: 'random',
  messages: [{ role: 'user' as const, content: 'Tell me everything.' }],
  max_tokens: 300,
  temperature: 0,
};

it('counts a call whose client hung up mid-stream, records no call for it, and keeps the episode’s team', async () => {
  const episode = (await swarmPost('/episodes', {
    model: 'random',
    taskId: 'long-answers',
    kind: 'eval',
    teamId: 'team-7',
  })) as unknown as CreateEpisodeResponse;
  const client = new OpenAI({ baseURL: episode.baseUrl, apiKey: episode.apiKey, maxRetries: 0 });

  // Precondition: this prompt is answered at full length, so a hang-up after the first token is mid-answer.
  const full = await client.chat.completions.create(request);
  expect(full.choices[0].finish_reason).toBe('length');

  const hangUp = new AbortController();
  const stream = await client.chat.completions.create(
    { ...request, stream: true },
    { signal: hangUp.signal },
  );
  // The client's stream just ends when it is aborted.
  for await (const chunk of stream) if (chunk.choices[0]?.delta.content) hangUp.abort();
  expect(hangUp.signal.aborted).toBe(true);

  await vi.waitFor(() => expect(getEpisode(runtime.db, episode.episodeId)!.cancelledCalls).toBe(1));
  const ended = await swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 0 });
  expect(ended).toMatchObject({ state: 'ended', calls: 1 });
  expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(1);
  expect(getEpisode(runtime.db, episode.episodeId)).toMatchObject({ teamId: 'team-7', cancelledCalls: 1 });
});

/** Reads a server-sent event stream until a frame of `type` arrives, then hangs up. */
async function hangUpAfter(url: string, apiKey: string, body: unknown, type: string): Promise<void> {
  const hangUp = new AbortController();
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: hangUp.signal,
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before a ${type} event`);
    seen += decoder.decode(value, { stream: true });
    if (seen.includes(`event: ${type}\n`)) break;
  }
  hangUp.abort();
}

it.each([
  ['Messages', '/v1/messages', { max_tokens: 300, stream: true }, 'content_block_delta'],
  ['Responses', '/v1/responses', { max_output_tokens: 300, stream: true }, 'response.output_text.delta'],
])('counts a %s stream whose client hung up mid-answer, and records no call for it', async (_api, path, extra, type) => {
  const episode = (await swarmPost('/episodes', { model: 'random', taskId: 'long-answers', kind: 'eval', sampling: { temperature: 0 } })) as unknown as CreateEpisodeResponse;
  const conversation = path === '/v1/messages' ? { messages: request.messages } : { input: request.messages };
  await hangUpAfter(`http://127.0.0.1:${runtime.port}${path}`, episode.apiKey, { model: 'random', ...conversation, ...extra }, type);
  await vi.waitFor(() => expect(getEpisode(runtime.db, episode.episodeId)!.cancelledCalls).toBe(1));
  expect(getCalls(runtime.db, episode.episodeId)).toHaveLength(0);
});
