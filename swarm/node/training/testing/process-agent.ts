/**
 * A test agent for a peer running in a child process (swarm/node/p2p/testing/runtime-processes.ts): the same
 * two-call episodes as peer-agent.ts, over HTTP only, with a sampling seed so that the same weights give the same
 * tokens; and the peer's `train-step` events over its WebSocket, to wait on a step without polling.
 */
import { expect } from 'vitest';
import WebSocket from 'ws';
import type { ServerEvent, TrainStepSummary } from '../../../common/api.ts';
import type { CreateEpisodeResponse } from '../../../common/swarm-api.ts';
import type { RuntimeProcess } from '../../p2p/testing/runtime-processes.ts';

/** Tokens per answer: enough to train on, few enough to keep a step fast. */
const MAX_TOKENS = 6;

export async function startSeededEpisode(peer: RuntimeProcess, taskId: string, seed: number): Promise<CreateEpisodeResponse> {
  const begun = await peer.post('/swarm/v1/episodes', { model: 'tiny', taskId, sampling: { max_tokens: MAX_TOKENS, seed } });
  expect(begun.status, JSON.stringify(begun.body)).toBe(201);
  return begun.body as unknown as CreateEpisodeResponse;
}

export async function chatOnce(episode: CreateEpisodeResponse, messages: { role: string; content: string }[]): Promise<string> {
  const res = await fetch(`${episode.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', messages, max_tokens: MAX_TOKENS }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { choices: { message: { content: string | null } }[] };
  return body.choices[0].message.content ?? '';
}

/** Act, observe, act again, then the acknowledged end with `reward`; the episode's id. */
export async function runSeededEpisode(peer: RuntimeProcess, taskId: string, reward: number, seed: number): Promise<string> {
  const episode = await startSeededEpisode(peer, taskId, seed);
  const messages = [
    { role: 'system', content: 'You solve tasks.' },
    { role: 'user', content: `Task ${taskId}: count to three.` },
  ];
  const first = await chatOnce(episode, messages);
  await chatOnce(episode, [...messages, { role: 'assistant', content: first }, { role: 'user', content: 'Output: ok' }]);
  const end = await peer.post(`/swarm/v1/episodes/${episode.episodeId}/end`, { reward });
  expect(end.status, JSON.stringify(end.body)).toBe(200);
  return episode.episodeId;
}

/** The peer's train-step events as they come; `step(n)` resolves when step n has been committed and announced. */
export interface StepEvents {
  opened: Promise<void>;
  step(n: number): Promise<TrainStepSummary>;
  close(): void;
}

export function listenSteps(peer: RuntimeProcess): StepEvents {
  const ws = new WebSocket(`ws://127.0.0.1:${peer.port}/api/events?token=${peer.token}`);
  const seen = new Map<number, TrainStepSummary>();
  const waiting = new Map<number, (s: TrainStepSummary) => void>();
  ws.on('message', (data) => {
    const event = JSON.parse(String(data)) as ServerEvent;
    if (event.type !== 'train-step') return;
    seen.set(event.data.step, event.data);
    waiting.get(event.data.step)?.(event.data);
  });
  return {
    opened: new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    }),
    step(n) {
      const done = seen.get(n);
      if (done) return Promise.resolve(done);
      return new Promise((resolve) => waiting.set(n, resolve));
    },
    close: () => ws.close(),
  };
}

