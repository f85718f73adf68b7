import type { EpisodeExport } from '../../../../swarm/common/timeline/export.ts';
import type { MergeDecision, MergeReason } from '../../../../swarm/common/timeline/merge.ts';
import type { TimelineState } from './slice.ts';

/** Each merge reason in a few words (the decision's own `detail` sentence is shown beside it). */
export const MERGE_REASON_LABELS: Record<MergeReason, string> = {
  'first-call': 'First call',
  'extends-timeline': 'Extends the timeline',
  'different-agent': 'Different agent',
  'no-prefix-match': 'No shared prefix',
  'prefix-mismatch': 'Prompt history changed',
  'generated-history-rewritten': 'Generated history rewritten',
  'parallel-branch': 'Parallel branch',
  'history-truncated': 'History truncated',
  'naive-mode': 'Naive mode (no merging)',
};

export interface SavingsSummary {
  naiveTokens: number;
  mergedTokens: number;
  savedTokens: number;
  /** naive ÷ merged, e.g. 3.2 (×). */
  tokenRatio: number;
  /** Saved share of the naive tokens, 0–1. */
  savedShare: number;
}

function savingsSummary(
  savings: Pick<EpisodeExport['savings'], 'naiveTokens' | 'mergedTokens' | 'savedTokens' | 'tokenRatio'>,
): SavingsSummary {
  return {
    naiveTokens: savings.naiveTokens,
    mergedTokens: savings.mergedTokens,
    savedTokens: savings.savedTokens,
    tokenRatio: savings.tokenRatio,
    savedShare: savings.naiveTokens > 0 ? savings.savedTokens / savings.naiveTokens : 0,
  };
}

function selectedDecision(timeline: TimelineState): MergeDecision | null {
  if (!timeline.doc || !timeline.selectedCallId) return null;
  return timeline.doc.decisions.find((d) => d.callId === timeline.selectedCallId) ?? null;
}

/** The call id one step before or after the selected one, in call order (keyboard navigation of rows). */
function stepCall(timeline: TimelineState, direction: 1 | -1): string | null {
  const calls = timeline.layout?.calls ?? [];
  if (calls.length === 0) return null;
  const index = calls.findIndex((c) => c.callId === timeline.selectedCallId);
  if (index === -1) return direction === 1 ? calls[0].callId : calls[calls.length - 1].callId;
  return calls[Math.min(calls.length - 1, Math.max(0, index + direction))].callId;
}

/** Counts of decisions by action, for the header ("12 joined, 2 started"). */
function decisionCounts(doc: EpisodeExport | null): { joined: number; started: number } {
  let joined = 0;
  for (const decision of doc?.decisions ?? []) if (decision.action === 'joined') joined++;
  return { joined, started: (doc?.decisions.length ?? 0) - joined };
}

export const timelineSelectors = { savingsSummary, selectedDecision, stepCall, decisionCounts };
