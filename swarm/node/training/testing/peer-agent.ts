/**
 * A test agent driving a real peer over HTTP the way an agent script and its runner do: episodes through the swarm
 * API (control token), LLM calls through the OpenAI-compatible gateway (the episode's key). The hosted model is
 * called `tiny` and answers at most 6 tokens a call.
 */
import { expect } from 'vitest';
import type { CreateEpisodeResponse } from '../../../common/swarm-api.ts';
import type { PeerRuntime } from '../../runtime.ts';

export const MODEL = 'tiny';
const MAX_TOKENS = 6;

export type Answer = { status: number; body: Record<string, unknown> & { error?: { name: string } } };

export async function post(
  runtime: PeerRuntime,
  path: string,
  body: unknown,
  token = runtime.token,
): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${runtime.port}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

export async function get(runtime: PeerRuntime, path: string): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${runtime.port}${path}`, {
    headers: { authorization: `Bearer ${runtime.token}` },
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

export async function startEpisode(
  runtime: PeerRuntime,
  taskId: string,
  extra: Record<string, unknown> = {},
): Promise<CreateEpisodeResponse> {
  const res = await post(runtime, '/swarm/v1/episodes', {
    model: MODEL,
    taskId,
    sampling: { max_tokens: MAX_TOKENS },
    ...extra,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as unknown as CreateEpisodeResponse;
}

/** One LLM call of the episode through the OpenAI-compatible gateway; its answer's text. */
export async function chat(
  episode: CreateEpisodeResponse,
  messages: { role: string; content: string }[],
): Promise<string> {
  const res = await fetch(`${episode.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages, max_tokens: MAX_TOKENS }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { choices: { message: { content: string | null } }[] };
  return body.choices[0].message.content ?? '';
}

/** A two-turn agent: act, observe, act again; then report the reward (and, when given, whether it succeeded). */
export async function runEpisode(
  runtime: PeerRuntime,
  taskId: string,
  reward: number,
  { kind = 'train', success }: { kind?: 'train' | 'eval'; success?: boolean } = {},
): Promise<string> {
  const episode = await startEpisode(runtime, taskId, { kind });
  const messages = [
    { role: 'system', content: 'You solve tasks.' },
    { role: 'user', content: `Task ${taskId}: count to three.` },
  ];
  const first = await chat(episode, messages);
  await chat(episode, [
    ...messages,
    { role: 'assistant', content: first },
    { role: 'user', content: 'Output: ok' },
  ]);
  const end = await post(runtime, `/swarm/v1/episodes/${episode.episodeId}/end`, { reward, success });
  expect(end.status, JSON.stringify(end.body)).toBe(200);
  return episode.episodeId;
}
