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
 *   npm run bench -- gateway [--json] [--episodes N] [--calls N]
 * The JSON result keeps chat completions' numbers at the top level and adds `apis`, one entry per API.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { CreateEpisodeResponse } from '../swarm/common/swarm-api.ts';
import { PeerRuntime } from '../swarm/node/runtime.ts';
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
      rows.push({
        api,
        episodes,
        calls: overheads.length,
        p50_overhead_ms: round(pct(0.5)),
        p99_overhead_ms: round(pct(0.99)),
        calls_per_s: round(overheads.length / seconds),
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
