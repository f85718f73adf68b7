/**
 * Gateway overhead: what the gateway and the context tracker add to each call, generation excluded, with 64
 * episodes calling at once on the builtin tiny model (max_tokens 1, so generation is as short as it gets), for each
 * API the gateway serves: chat completions, the Responses API and Anthropic's Messages API (one row each).
 *
 * Overhead is measured inside the peer (gateway/call.ts, BusyClock): the synchronous stretches the
 * gateway runs for a call — auth, JSON parsing and validation, prompt rendering with splicing, recording and storing
 * the call (SQLite), serializing the answer. Generation (in the engine's worker thread), network I/O and time spent
 * queued behind other requests on the event loop are left out. Target: p50 < 1 ms.
 *
 * Time to first token, per API, streamed (`stream: true`, max_tokens 8), the same concurrent episodes again:
 * - ttft_ms: at the client, from sending the request to the first content delta read off the SSE stream
 *   (chat: choices[0].delta.content; Responses: response.output_text.delta; Messages: a text_delta);
 * - engine_first_token_ms: the engine's own time to the call's first generated token, queuedMs + prefillMs of its
 *   GenerateResult (queued in the sampler, then prefilled; the first token is sampled off the prefill);
 * - ttft_overhead_ms: per call, ttft_ms − engine_first_token_ms: what the gateway, the worker-thread hops, the
 *   event loop, HTTP and SSE add before the client sees its first token. Calls are paired through their recorded
 *   prompt ids; a call whose answer had no visible text is left out (counted in ttft_calls).
 *
 *   npm run bench -- gateway [--json] [--episodes N] [--calls N]
 * The JSON result keeps chat completions' numbers at the top level and adds `apis`, one entry per API.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { CreateEpisodeResponse } from '../swarm/common/swarm-api.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
import { getCalls } from '../swarm/node/store/episode-reads.ts';
import type { GenerateResult } from '../worker/common/engine.ts';
import { formatTable, type BenchContext } from './report.ts';

interface ChatMessage {
  role: 'user' | 'assistant';
  content: string;
}

type Api = 'chat' | 'responses' | 'messages';
const APIS: Api[] = ['chat', 'responses', 'messages'];

/** One call of `api` for a conversation of plain turns: its path, its body, and how to read its answer's text. */
function callOf(api: Api, messages: ChatMessage[]): { path: string; body: unknown; text: (answer: unknown) => string } {
  if (api === 'responses') {
    return {
      path: '/responses',
      body: { model: 'tiny', input: messages, max_output_tokens: 1 },
      text: (a) => ((a as { output: { type: string; content?: { text: string }[] }[] }).output.find((i) => i.type === 'message')?.content?.[0]?.text ?? ''),
    };
  }
  if (api === 'messages') {
    return {
      path: '/messages',
      body: { model: 'tiny', messages, max_tokens: 1 },
      text: (a) => ((a as { content: { type: string; text?: string }[] }).content.find((b) => b.type === 'text')?.text ?? ''),
    };
  }
  return {
    path: '/chat/completions',
    body: { model: 'tiny', messages, max_tokens: 1 },
    text: (a) => (a as { choices: { message: { content: string | null } }[] }).choices[0].message.content ?? '',
  };
}

/** A streamed call of `api` (max_tokens 8): its path and body, and the visible text one SSE frame's data adds. */
function streamCallOf(api: Api, messages: ChatMessage[]): { path: string; body: unknown; delta: (data: unknown) => string } {
  if (api === 'responses') {
    return {
      path: '/responses',
      body: { model: 'tiny', input: messages, max_output_tokens: STREAM_MAX_TOKENS, stream: true },
      delta: (d) => {
        const event = d as { type?: string; delta?: string };
        return event.type === 'response.output_text.delta' ? (event.delta ?? '') : '';
      },
    };
  }
  if (api === 'messages') {
    return {
      path: '/messages',
      body: { model: 'tiny', messages, max_tokens: STREAM_MAX_TOKENS, stream: true },
      delta: (d) => {
        const event = d as { type?: string; delta?: { type?: string; text?: string } };
        return event.type === 'content_block_delta' && event.delta?.type === 'text_delta' ? (event.delta.text ?? '') : '';
      },
    };
  }
  return {
    path: '/chat/completions',
    body: { model: 'tiny', messages, max_tokens: STREAM_MAX_TOKENS, stream: true },
    delta: (d) => (d as { choices?: { delta?: { content?: string | null } }[] }).choices?.[0]?.delta?.content ?? '',
  };
}

const STREAM_MAX_TOKENS = 8;

/**
 * Reads an SSE body to its end: the whole visible text, and ms from `sentAt` to the first non-empty content delta
 * (null when there was none).
 */
async function readStream(res: Response, sentAt: number, delta: (data: unknown) => string): Promise<{ text: string; ttftMs: number | null }> {
  const decoder = new TextDecoder();
  let buffered = '';
  let text = '';
  let ttftMs: number | null = null;
  const take = (frame: string) => {
    for (const line of frame.split('\n')) {
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '' || data === '[DONE]') continue;
      const piece = delta(JSON.parse(data));
      if (piece === '') continue;
      ttftMs ??= performance.now() - sentAt;
      text += piece;
    }
  };
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      take(buffered.slice(0, end));
      buffered = buffered.slice(end + 2);
    }
  }
  take(buffered + decoder.decode());
  return { text, ttftMs };
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

export default async function gatewayBench(ctx: BenchContext) {
  const { values } = parseArgs({ args: ctx.args, options: { episodes: { type: 'string' }, calls: { type: 'string' } } });
  const episodes = Number(values.episodes ?? 64);
  const callsPerEpisode = Number(values.calls ?? 8);
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-bench-gateway-'));
  const runtime = await PeerRuntime.start({
    dataDir,
    port: 0,
    consoleLogLevel: 'warn',
    models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: episodes }],
  });
  try {
    const base = `http://127.0.0.1:${runtime.port}`;
    const swarm = async (path: string, body: unknown) => {
      const res = await fetch(`${base}/swarm/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${runtime.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`${path}: HTTP ${res.status} ${await res.text()}`);
      return res.json();
    };
    // One agent: a multi-turn conversation, so rendering splices earlier answers back in as real agents need.
    const runEpisode = async (api: Api, index: number, calls: number) => {
      const episode = (await swarm('/episodes', { model: 'tiny', taskId: `task-${index % 8}` })) as CreateEpisodeResponse;
      const messages: ChatMessage[] = [{ role: 'user', content: `task ${index}: solve it` }];
      for (let call = 0; call < calls; call++) {
        const request = callOf(api, messages);
        const res = await fetch(`${episode.baseUrl}${request.path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(request.body),
        });
        if (!res.ok) throw new Error(`${api} call: HTTP ${res.status} ${await res.text()}`);
        messages.push({ role: 'assistant', content: request.text(await res.json()) }, { role: 'user', content: `tool result ${call}` });
      }
      await swarm(`/episodes/${episode.episodeId}/end`, { reward: index % 2 });
    };

    // The engine's own first-token time of every generation, by the prompt ids it was given (the call records them).
    const engine = runtime.serving.models.models[0].engine;
    const generate = engine.generate.bind(engine);
    const engineFirstToken = new Map<string, number[]>();
    engine.generate = async (...args: Parameters<typeof generate>): Promise<GenerateResult> => {
      const result = await generate(...args);
      const key = args[0].promptIds.join(',');
      const list = engineFirstToken.get(key) ?? [];
      list.push(result.timings.queuedMs + result.timings.prefillMs);
      engineFirstToken.set(key, list);
      return result;
    };
    // The same conversation streamed: the client's time to first content delta of each call, in the episode's order.
    const streamEpisode = async (api: Api, index: number, calls: number) => {
      const episode = (await swarm('/episodes', { model: 'tiny', taskId: `task-${index % 8}` })) as CreateEpisodeResponse;
      const messages: ChatMessage[] = [{ role: 'user', content: `task ${index}: solve it` }];
      const ttfts: (number | null)[] = [];
      for (let call = 0; call < calls; call++) {
        const request = streamCallOf(api, messages);
        const sentAt = performance.now();
        const res = await fetch(`${episode.baseUrl}${request.path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(request.body),
        });
        if (!res.ok) throw new Error(`${api} stream: HTTP ${res.status} ${await res.text()}`);
        const { text, ttftMs } = await readStream(res, sentAt, request.delta);
        ttfts.push(ttftMs);
        messages.push({ role: 'assistant', content: text }, { role: 'user', content: `tool result ${call}` });
      }
      await swarm(`/episodes/${episode.episodeId}/end`, { reward: index % 2 });
      // Calls are recorded in completion order; an episode's calls are sequential, so call k is the k-th request.
      return getCalls(runtime.db, episode.episodeId).map((record, k) => {
        const engineMs = engineFirstToken.get(record.promptIds.join(','))?.shift();
        return { ttftMs: ttfts[k] ?? null, engineMs: engineMs ?? null };
      });
    };

    const rows = [];
    for (const api of APIS) {
      ctx.log(`${api}: warm-up: ${Math.min(episodes, 8)} episodes × 2 calls`);
      await Promise.all(Array.from({ length: Math.min(episodes, 8) }, (_, i) => runEpisode(api, i, 2)));
      runtime.serving.gateway.overhead.reset();

      ctx.log(`${api}: measuring: ${episodes} concurrent episodes × ${callsPerEpisode} calls`);
      const started = performance.now();
      await Promise.all(Array.from({ length: episodes }, (_, i) => runEpisode(api, i, callsPerEpisode)));
      const seconds = (performance.now() - started) / 1000;

      const overheads = runtime.serving.gateway.overhead.values().sort((a, b) => a - b);
      const pct = (p: number) => overheads[Math.min(overheads.length - 1, Math.floor(p * overheads.length))];

      ctx.log(`${api}: time to first token: ${episodes} concurrent episodes × ${callsPerEpisode} streamed calls`);
      engineFirstToken.clear();
      const streamed = (await Promise.all(Array.from({ length: episodes }, (_, i) => streamEpisode(api, i, callsPerEpisode)))).flat();
      const paired = streamed.filter((c): c is { ttftMs: number; engineMs: number } => c.ttftMs !== null && c.engineMs !== null);
      const roundOrNull = (value: number | null) => (value === null ? null : round(value));
      rows.push({
        api,
        episodes,
        calls: overheads.length,
        p50_overhead_ms: round(pct(0.5)),
        p99_overhead_ms: round(pct(0.99)),
        calls_per_s: round(overheads.length / seconds),
        ttft_calls: paired.length,
        ttft_ms_p50: roundOrNull(median(paired.map((c) => c.ttftMs))),
        engine_first_token_ms_p50: roundOrNull(median(paired.map((c) => c.engineMs))),
        ttft_overhead_ms_p50: roundOrNull(median(paired.map((c) => c.ttftMs - c.engineMs))),
      });
    }
    process.stdout.write(formatTable(rows) + '\n');
    const chat = rows[0];
    return {
      episodes,
      calls: chat.calls,
      p50_overhead_ms: chat.p50_overhead_ms,
      p99_overhead_ms: chat.p99_overhead_ms,
      calls_per_s: chat.calls_per_s,
      ttft_ms_p50: chat.ttft_ms_p50,
      engine_first_token_ms_p50: chat.engine_first_token_ms_p50,
      ttft_overhead_ms_p50: chat.ttft_overhead_ms_p50,
      backend: runtime.status().backend?.name ?? null,
      apis: Object.fromEntries(rows.map(({ api, ...row }) => [api, row])),
    };
  } finally {
    await runtime.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
