/** The demo's own parts of its report and console: labelled held-out points and the commands that open the run. */
import { describe, expect, it } from 'vitest';
import { lookAtRunLines, shellWord } from './demo-command.ts';
import { heldOutMarkers } from './report.ts';

describe('demo report and console', () => {
  it('labels the held-out before/after points at the starting weights and the last step', () => {
    expect(heldOutMarkers({ eval_before: 0.12, eval_after: 0.74 }, 15).map((m) => [m.x, m.y, m.label])).toEqual([
      [0, 0.12, 'before 12%'],
      [15, 0.74, 'after 74%'],
    ]);
  });

  it('prints the commands that open the run, with paths a shell keeps whole', () => {
    const lines = lookAtRunLines({ dataDir: '/tmp/my runs/peer', runId: 'tiny-1' });
    expect(lines.map((l) => l.trim().split(/:\s+/)[1])).toEqual([
      "agentjet node --data-dir '/tmp/my runs/peer'",
      "agentjet runs show tiny-1 --data-dir '/tmp/my runs/peer'",
      "agentjet runs report tiny-1 --data-dir '/tmp/my runs/peer'",
    ]);
    expect(shellWord("it's")).toBe(`'it'\\''s'`);
    expect(lookAtRunLines({ dataDir: '/d', runId: null })).toHaveLength(1);
  });
});
