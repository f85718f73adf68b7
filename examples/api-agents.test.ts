/**
 * The Messages and Responses example agents run as scripts (a child process each, as the runner starts them) against
 * a real peer, with only the environment an agent gets: each completes its task and its episode merges into one
 * timeline.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPeer, type TestPeer } from '../swarm/node/gateway/testing/peer.ts';
import { getCalls } from '../swarm/node/store/episode-reads.ts';

const run = promisify(execFile);
let peer: TestPeer;
beforeAll(async () => {
  peer = await startTestPeer();
});
afterAll(async () => peer?.stop());

async function runAgent(script: string, env: (episode: { baseUrl: string; apiKey: string }) => Record<string, string>) {
  const episode = await peer.startEpisode({ kind: 'eval', sampling: { temperature: 0 } });
  const file = fileURLToPath(new URL(script, import.meta.url));
  const { stdout } = await run(process.execPath, ['--import', 'tsx', file], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      AGENTJET_TASK: JSON.stringify({ id: 'calc-0', question: 'What is 51-52?', expression: '51-52', answer: -1 }),
      AGENTJET_MODEL: 'tiny',
      ...env(episode),
    },
  });
  const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { answer: unknown };
  expect(typeof result.answer).toBe('string');
  const calls = getCalls(peer.runtime.db, episode.episodeId);
  expect(calls.length).toBeGreaterThan(0);
  const ended = await peer.swarmPost(`/episodes/${episode.episodeId}/end`, { reward: 0 });
  expect(ended.body.timelines).toBe(1);
}

describe('example agents for the new APIs', () => {
  it('calculator-messages runs with ANTHROPIC_BASE_URL (the origin) and ANTHROPIC_API_KEY', async () => {
    await runAgent('./calculator-messages/agent.ts', (e) => ({ ANTHROPIC_BASE_URL: peer.origin, ANTHROPIC_API_KEY: e.apiKey }));
  });

  it('calculator-messages also runs with only the OpenAI pair a runner gives today', async () => {
    await runAgent('./calculator-messages/agent.ts', (e) => ({ OPENAI_BASE_URL: e.baseUrl, OPENAI_API_KEY: e.apiKey }));
  });

  it('calculator-responses runs with OPENAI_BASE_URL and OPENAI_API_KEY', async () => {
    await runAgent('./calculator-responses/agent.ts', (e) => ({ OPENAI_BASE_URL: e.baseUrl, OPENAI_API_KEY: e.apiKey }));
  });
});
