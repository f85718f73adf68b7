/**
 * The context tracker's own cost per LLM call on long episodes: rendering the conversation with the chat template,
 * splicing earlier generations back in and tokenizing the rest — with the episode's piece cache (the tracker as
 * the gateway uses it) and without it (every prompt tokenized from scratch), in one run.
 *
 *   npm run bench -- tracker [--json]
 *
 * Real Qwen3 tokenizer and template; synthetic agent episodes at full AppWorld-like sizes (tokens ≈ characters ÷ 4).
 * No model: generations are scripted, so only the tracker is timed.
 */
import type { ChatMessage } from '../worker/tokenizer/types.ts';
import { PieceCache, renderPrompt } from '../swarm/node/tracker/render.ts';
import { loadQwen3 } from '../swarm/node/tracker/testing/qwen3.ts';
import { EpisodeTracker } from '../swarm/node/tracker/tracker.ts';
import {
  observationMessage,
  openingMessages,
  syntheticText,
  type AgentWorkload,
} from '../swarm/node/training/testing/synthetic-agent.ts';
import { formatTable, type BenchContext, type Row } from './report.ts';

/** Sizes in characters (≈ 4 per Qwen3 token): 25 turns ≈ the AppWorld-like workload of the merge benchmark. */
const WORKLOADS: AgentWorkload[] = [
  { turns: 25, promptTokens: 4000, observationTokens: 600, actionTokens: 240 },
  { turns: 50, promptTokens: 4000, observationTokens: 600, actionTokens: 240 },
];

interface EpisodeTiming {
  renderMs: number[];
  promptTokens: number;
  mergeRate: number | null;
}

function playEpisode(workload: AgentWorkload, cached: boolean): EpisodeTiming {
  const { tokenizer, template } = loadQwen3();
  const tracker = new EpisodeTracker({ episodeId: 'bench', tokenizer, template });
  const messages: ChatMessage[] = openingMessages(workload, 1);
  const renderMs: number[] = [];
  let promptTokens = 0;
  for (let turn = 0; turn < workload.turns; turn++) {
    const started = performance.now();
    const rendered = cached
      ? tracker.render(messages)
      : renderPrompt({ tokenizer, template, messages, history: tracker.calls, pieceCache: new PieceCache() });
    renderMs.push(performance.now() - started);
    promptTokens = rendered.promptIds.length;
    const action = syntheticText(workload.actionTokens, turn);
    const generatedIds = [...tokenizer.encode(action), tokenizer.eosTokenIds[0]];
    tracker.record({
      messages: [...messages],
      rendered,
      generatedIds,
      logprobs: generatedIds.map(() => -1),
      assistantMessage: { role: 'assistant', content: action },
      finishReason: 'stop',
      policyVersion: 0,
      timings: { startedAt: '', firstTokenAt: null, endedAt: '' },
    });
    messages.push({ role: 'assistant', content: action }, observationMessage(workload, 1, turn));
  }
  return { renderMs, promptTokens, mergeRate: tracker.merge().savings.mergeRate };
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const round = (x: number) => Math.round(x * 100) / 100;

export default async function tracker(ctx: BenchContext): Promise<Record<string, unknown>> {
  playEpisode({ turns: 3, promptTokens: 400, observationTokens: 60, actionTokens: 24 }, true); // warm-up (JIT, tokenizer)
  const rows: Row[] = [];
  for (const workload of WORKLOADS) {
    ctx.log(`tracker: ${workload.turns} turns, uncached then cached …`);
    const uncached = playEpisode(workload, false);
    const cached = playEpisode(workload, true);
    const lastTen = (t: EpisodeTiming) => median(t.renderMs.slice(-10));
    rows.push({
      turns: workload.turns,
      final_prompt_tokens: cached.promptTokens,
      uncached_ms_p50_last10: round(lastTen(uncached)),
      cached_ms_p50_last10: round(lastTen(cached)),
      speedup_last10: round(lastTen(uncached) / lastTen(cached)),
      uncached_total_ms: Math.round(uncached.renderMs.reduce((a, b) => a + b, 0)),
      cached_total_ms: Math.round(cached.renderMs.reduce((a, b) => a + b, 0)),
      merge_rate: cached.mergeRate,
      merge_rate_uncached: uncached.mergeRate,
    });
  }
  process.stdout.write('tracker: render + splice + tokenize per call (Qwen3 tokenizer and template)\n');
  process.stdout.write(formatTable(rows) + '\n');
  return { workloads: rows };
}
