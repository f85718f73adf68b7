/**
 * Gateway overhead: what the gateway and the context tracker add to each call, generation excluded, with 64
 * episodes calling at once on the builtin tiny model (max_tokens 1, so generation is as short as it gets).
 *
 * Overhead is measured inside the peer (gateway/chat-completions.ts, BusyClock): the synchronous stretches the
 * gateway runs for a call — auth, JSON parsing and validation, prompt rendering with splicing, recording and storing
 * the call (SQLite), serializing the answer. Generation (in the engine's worker thread), network I/O and time spent
 * queued behind other requests on the event loop are left out. Target: p50 < 1 ms.
 *
 *   npm run bench -- gateway [--json] [--episodes N] [--calls N]
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
    const runEpisode = async (index: number, calls: number) => {
      const episode = (await swarm('/episodes', { model: 'tiny', taskId: `task-${index % 8}` })) as CreateEpisodeResponse;
      const messages: ChatMessage[] = [{ role: 'user', content: `task ${index}: solve it` }];
      for (let call = 0; call < calls; call++) {
        const res = await fetch(`${episode.baseUrl}/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${episode.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny', messages, max_tokens: 1 }),
        });
        if (!res.ok) throw new Error(`call: HTTP ${res.status} ${await res.text()}`);
        const answer = (await res.json()) as { choices: { message: { content: string | null } }[] };
        messages.push({ role: 'assistant', content: answer.choices[0].message.content ?? '' }, { role: 'user', content: `tool result ${call}` });
      }
      await swarm(`/episodes/${episode.episodeId}/end`, { reward: index % 2 });
    };

    ctx.log(`warm-up: ${Math.min(episodes, 8)} episodes × 2 calls`);
    await Promise.all(Array.from({ length: Math.min(episodes, 8) }, (_, i) => runEpisode(i, 2)));
    runtime.serving.gateway.overhead.reset();

    ctx.log(`measuring: ${episodes} concurrent episodes × ${callsPerEpisode} calls`);
    const started = performance.now();
    await Promise.all(Array.from({ length: episodes }, (_, i) => runEpisode(i, callsPerEpisode)));
    const seconds = (performance.now() - started) / 1000;

    const overheads = runtime.serving.gateway.overhead.values().sort((a, b) => a - b);
    const pct = (p: number) => overheads[Math.min(overheads.length - 1, Math.floor(p * overheads.length))];
    const result = {
      episodes,
      calls: overheads.length,
      p50_overhead_ms: round(pct(0.5)),
      p99_overhead_ms: round(pct(0.99)),
      calls_per_s: round(overheads.length / seconds),
      backend: runtime.status().backend?.name ?? null,
    };
    process.stdout.write(formatTable([result]) + '\n');
    return result;
  } finally {
    await runtime.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
