import { describe, expect, it } from 'vitest';
import { createAppStore } from '../index.ts';
import { timelineSelectors } from './selectors.ts';
import { syntheticEpisodeExport } from './testing/synthetic-episode.ts';

describe('timeline slice', () => {
  const doc = syntheticEpisodeExport({ turns: 5, systemTokens: 20, toolTokens: 4, generatedTokens: 6 });

  it('shows the export it asked for last, and ignores an older answer', () => {
    const store = createAppStore();
    const first = store.getState().timelineRequested('ep-1', 'merged');
    const second = store.getState().timelineRequested('ep-synthetic', 'merged');
    store.getState().timelineLoaded(first, { ...doc, episode: { ...doc.episode, id: 'ep-1' } });
    expect(store.getState().timeline.doc).toBeNull();
    store.getState().timelineLoaded(second, doc);
    const { timeline } = store.getState();
    expect(timeline.loading).toBe(false);
    expect(timeline.layout?.calls).toHaveLength(5);
    expect(timelineSelectors.decisionCounts(timeline.doc)).toEqual({ joined: 4, started: 1 });
  });

  it('summarises savings exactly as the export reports them', () => {
    const summary = timelineSelectors.savingsSummary(doc.savings);
    expect(summary.naiveTokens).toBe(doc.savings.naiveTokens);
    expect(summary.mergedTokens).toBe(doc.savings.mergedTokens);
    expect(summary.naiveTokens).toBeGreaterThan(summary.mergedTokens);
    expect(summary.savedShare).toBeCloseTo(doc.savings.savedTokens / doc.savings.naiveTokens);
  });

  it('steps through calls with the keyboard, stopping at both ends', () => {
    const store = createAppStore();
    store.getState().timelineLoaded(store.getState().timelineRequested('ep-synthetic', 'merged'), doc);
    const step = (d: 1 | -1) =>
      store.getState().timelineCallSelected(timelineSelectors.stepCall(store.getState().timeline, d));
    step(1);
    expect(store.getState().timeline.selectedCallId).toBe('call-0');
    step(-1);
    expect(store.getState().timeline.selectedCallId).toBe('call-0');
    for (let i = 0; i < 10; i++) step(1);
    expect(store.getState().timeline.selectedCallId).toBe('call-4');
    expect(timelineSelectors.selectedDecision(store.getState().timeline)?.reason).toBe('extends-timeline');
  });
});
