import { describe, expect, it } from 'vitest';
import {
  CALL_ROW_HEIGHT,
  LANE_ROW_HEIGHT,
  MAX_PX_PER_TOKEN,
  TokenKind,
  buildMergeLayout,
  clampViewport,
  fitViewport,
  panViewport,
  rowAtY,
  rowsInView,
  tokenAt,
  tokenAtX,
  zoomViewport,
} from './layout.ts';
import { syntheticEpisodeExport } from './testing/synthetic-episode.ts';

describe('merge layout', () => {
  const doc = syntheticEpisodeExport({
    turns: 4,
    systemTokens: 10,
    toolTokens: 3,
    generatedTokens: 5,
    restartAt: [2],
  });
  const layout = buildMergeLayout(doc);

  it('draws one lane per timeline with a row per call, in call order', () => {
    expect(layout.lanes).toHaveLength(2);
    expect(layout.calls.map((c) => c.callId)).toEqual(['call-0', 'call-1', 'call-2', 'call-3']);
    expect(layout.rows.map((r) => r.type)).toEqual(['lane', 'call', 'call', 'lane', 'call', 'call']);
    expect(layout.calls.map((c) => c.decision?.action)).toEqual(['started', 'joined', 'started', 'joined']);
  });

  it('colours the first prompt as prompt, later tool results as environment, generations as generated', () => {
    const lane = layout.lanes[0];
    // call-0: 10 prompt + 5 generated; call-1 adds 3 tool tokens, then 5 generated.
    expect([...lane.kinds.slice(0, 10)].every((k) => k === TokenKind.prompt)).toBe(true);
    expect([...lane.kinds.slice(10, 15)].every((k) => k === TokenKind.generated)).toBe(true);
    expect([...lane.kinds.slice(15, 18)].every((k) => k === TokenKind.environment)).toBe(true);
    expect([...lane.kinds.slice(18, 23)].every((k) => k === TokenKind.generated)).toBe(true);
    expect(lane.kinds.length).toBe(23);
    // Generated tokens are exactly the mask-1 tokens of the export.
    const generated = [...lane.kinds].map((k) => (k === TokenKind.generated ? 1 : 0));
    expect(generated).toEqual(doc.timelines[0].lossMask);
  });

  it('finds the row under a y coordinate and the rows in a window', () => {
    expect(rowAtY(layout, 1)?.type).toBe('lane');
    const firstCall = rowAtY(layout, LANE_ROW_HEIGHT + 1);
    expect(firstCall?.type === 'call' && firstCall.call.callId).toBe('call-0');
    expect(rowAtY(layout, LANE_ROW_HEIGHT + 2 * CALL_ROW_HEIGHT + 2)).toBeNull(); // the gap between lanes
    expect(rowsInView(layout, 0, layout.height)).toHaveLength(layout.rows.length);
    expect(rowsInView(layout, layout.rows[3].top, 1)).toEqual([layout.rows[3]]);
  });

  it('reports a hovered token with its text, id and logprob; reused prefix of a joined call is marked', () => {
    const joined = layout.rows[2];
    const reused = tokenAt(layout, joined, 3);
    expect(reused).toMatchObject({ kind: TokenKind.prompt, reused: true, logprob: null, callId: 'call-1' });
    expect(reused?.text).toBe(`t${reused?.tokenId}`);
    const generated = tokenAt(layout, joined, 20);
    expect(generated?.kind).toBe(TokenKind.generated);
    expect(generated?.logprob).toBeCloseTo(doc.timelines[0].logprobs[20]);
    expect(tokenAt(layout, joined, 23)).toBeNull();
  });
});

describe('viewport', () => {
  const width = 1000;
  it('fits the whole episode, then zooms around the pointer down to single tokens', () => {
    const fit = fitViewport(30_000, width);
    expect(fit.pxPerToken * 30_000).toBeCloseTo(width);
    const zoomed = zoomViewport(fit, 1e6, 500, 30_000, width);
    expect(zoomed.pxPerToken).toBe(MAX_PX_PER_TOKEN);
    // The token under the pointer stays under the pointer.
    expect(tokenAtX(zoomed, 500)).toBe(tokenAtX(fit, 500));
    const out = zoomViewport(zoomed, 1e-9, 500, 30_000, width);
    expect(out).toEqual(fit);
  });

  it('pans within the tokens and never past either end', () => {
    const view = { firstToken: 100, pxPerToken: 10 };
    expect(panViewport(view, -5000, 30_000, width).firstToken).toBe(0);
    expect(panViewport(view, 1e9, 30_000, width).firstToken).toBe(30_000 - width / 10);
    expect(panViewport(view, 100, 30_000, width).firstToken).toBe(110);
    expect(clampViewport({ firstToken: -3, pxPerToken: 10 }, 5000, width)).toEqual({
      firstToken: 0,
      pxPerToken: 10,
    });
    // Fewer tokens than fit: zooming out stops at "whole episode".
    expect(clampViewport({ firstToken: 0, pxPerToken: 1 }, 50, width).pxPerToken).toBe(20);
  });
});
