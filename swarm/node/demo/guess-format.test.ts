/**
 * The warm start learns guess the number from guess-format.ts; the agents play examples/guess-the-number/agent.py.
 * Both must hold the same conversation, word for word, and grade it the same: the Python agent is run against a
 * scripted OpenAI-compatible endpoint (a stand-in for the model) and compared with the TypeScript game.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../../worker/tokenizer/types.ts';
import { GUESS_GAME, type GuessTask, makeGuessTasks, playGuess } from './guess-format.ts';

const AGENT = fileURLToPath(new URL('../../../examples/guess-the-number/agent.py', import.meta.url));

/** The endpoint answers each request with the next scripted reply and keeps the messages it was sent. */
let server: Server;
let replies: string[] = [];
let requests: ChatMessage[][] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      requests.push((JSON.parse(body) as { messages: ChatMessage[] }).messages);
      const content = replies[requests.length - 1] ?? '';
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function runAgent(task: GuessTask, scripted: string[]): Promise<{ requests: ChatMessage[][]; result: { reward: number; success: boolean } }> {
  replies = scripted;
  requests = [];
  const port = (server.address() as AddressInfo).port;
  const child = spawn('python3', [AGENT], {
    env: { PATH: process.env.PATH, AGENTJET_TASK: JSON.stringify(task), OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, OPENAI_API_KEY: 'k', AGENTJET_MODEL: 'm' },
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code).toBe(0);
  return { requests, result: JSON.parse(stdout.trim().split('\n').pop()!) as { reward: number; success: boolean } };
}

describe('guess the number: agent.py and guess-format.ts', () => {
  const games: Array<[string, number, string[], Partial<GuessTask>?]> = [
    ['halving', 3, ['4', '2', '3']],
    ['found first', 4, ['4']],
    ['strays and runs out', 6, ['9', 'five', '1']],
    ['lower then higher', 5, ['6', '4', '5']],
    // Past LISTED_AT_MOST numbers the range is said by its bounds, then listed once it is short enough.
    ['a wide range', 17, ['10', '20', '15', '17'], { max: 30, moves: 5 }],
  ];
  for (const [what, secret, scripted, size] of games) {
    it(`say the same words and give the same reward (${what})`, async () => {
      const task: GuessTask = { id: 't', secret, ...GUESS_GAME, ...size };
      const agent = await runAgent(task, scripted);
      const seen: ChatMessage[][] = [];
      const game = await playGuess(task, (messages, state) => {
        seen.push(messages.map((m) => ({ ...m })));
        return scripted[state.used];
      });
      expect(agent.requests.map((messages) => messages.map(({ role, content }) => ({ role, content })))).toEqual(seen);
      expect(agent.result.success).toBe(game.state.found);
      expect(agent.result.reward).toBeCloseTo(game.reward, 12);
    }, 30_000);
  }

  it('grades halving above blind guessing, and a found secret above any miss', async () => {
    const task: GuessTask = { id: 't', secret: 3, ...GUESS_GAME };
    const halving = await playGuess(task, (_, s) => String(Math.floor((s.low + s.high) / 2)));
    const blind = await playGuess(task, () => '7');
    const narrow = await playGuess({ ...task, secret: 1 }, (_, s) => String(s.high));
    expect(halving.state.found).toBe(true);
    expect(blind.state.found).toBe(false);
    expect(narrow.state.found).toBe(false);
    expect(halving.reward).toBeGreaterThan(narrow.reward);
    expect(narrow.reward).toBeGreaterThan(blind.reward);
  });

  it('holds out the same game: every secret in both splits, ids apart', () => {
    const train = makeGuessTasks(200, 1, 'train', false);
    const held = makeGuessTasks(200, 2, 'eval', true);
    expect(new Set(train.map((t) => t.secret)).size).toBe(GUESS_GAME.max);
    expect(new Set(held.map((t) => t.secret)).size).toBe(GUESS_GAME.max);
    expect(held.every((t) => t.split === 'eval')).toBe(true);
    expect(train.some((t) => 'split' in t)).toBe(false);
  });
});
