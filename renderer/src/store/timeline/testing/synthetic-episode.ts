/**
 * Builds episode exports for tests and the benchmark the way the peer does: real calls merged by the real merger
 * (swarm/common/timeline/merge.ts) and exported by buildEpisodeExport.
 */
import type { CallRecord } from '../../../../../swarm/common/timeline/call.ts';
import { buildEpisodeExport, type EpisodeExport } from '../../../../../swarm/common/timeline/export.ts';
import { mergeTimelines } from '../../../../../swarm/common/timeline/merge.ts';
import { toMergeCalls } from '../../../../../swarm/common/timeline/call.ts';

export interface SyntheticEpisodeOptions {
  turns: number;
  /** Tokens of the first prompt, of each tool result, and of each generation. */
  systemTokens: number;
  toolTokens: number;
  generatedTokens: number;
  /** Call indexes whose prompt drops the history (they start a new timeline). */
  restartAt?: readonly number[];
}

/** An agent loop: each call's prompt is the previous prompt + its generation + a tool result. */
export function syntheticEpisodeExport(options: SyntheticEpisodeOptions): EpisodeExport {
  const restart = new Set(options.restartAt ?? []);
  let next = 1000;
  const fresh = (n: number) => Array.from({ length: n }, () => next++ % 50_000);
  let history = fresh(options.systemTokens);
  const calls: CallRecord[] = [];
  for (let index = 0; index < options.turns; index++) {
    if (restart.has(index)) history = fresh(options.systemTokens);
    const generatedIds = fresh(options.generatedTokens);
    const time = new Date(Date.UTC(2026, 0, 1, 0, 0, index)).toISOString();
    calls.push({
      callId: `call-${index}`,
      index,
      agentKey: 'agent',
      messages: [{ role: 'user', content: `turn ${index}` }],
      tools: null,
      promptIds: history,
      generatedIds,
      logprobs: generatedIds.map((_, i) => -((i * 7) % 13) / 4),
      assistantMessage: { role: 'assistant', content: `answer ${index}` },
      finishReason: 'stop',
      policyVersion: 1,
      timings: { startedAt: time, firstTokenAt: time, endedAt: time },
      splice: { assistantTurns: 0, splicedTurns: 0, driftPreventedTurns: 0, turns: [] },
    });
    history = [...history, ...generatedIds, ...fresh(options.toolTokens)];
  }
  const episode = {
    id: 'ep-synthetic',
    model: 'tiny',
    taskId: 'task-1',
    groupId: 'task-1',
    kind: 'train' as const,
    state: 'ended' as const,
    reward: 1,
    success: true,
    metrics: null,
    abortReason: null,
    createdAt: new Date(Date.UTC(2026, 0, 1)).toISOString(),
    endedAt: null,
    client: null,
    scriptHash: null,
    policyVersion: 1,
  };
  return buildEpisodeExport({
    episode,
    calls,
    merge: mergeTimelines(toMergeCalls(calls), 'merged'),
    tokenText: (id) => `t${id}`,
  });
}
