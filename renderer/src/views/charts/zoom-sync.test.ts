import { describe, expect, it } from 'vitest';
import { createZoomGroups, type ZoomMember, type ZoomRange } from './zoom-sync.ts';

function member(): ZoomMember & { seen: ZoomRange[] } {
  const seen: ZoomRange[] = [];
  return { seen, applyZoom: (range) => seen.push(range) };
}

describe('zoom groups', () => {
  it('passes a zoom to the other members of the group only', () => {
    const groups = createZoomGroups();
    const [a, b, c] = [member(), member(), member()];
    groups.join('run:1', a);
    groups.join('run:1', b);
    groups.join('run:2', c);
    groups.broadcast('run:1', a, [10, 20]);
    groups.broadcast('run:1', b, null);
    expect(a.seen).toEqual([null]);
    expect(b.seen).toEqual([[10, 20]]);
    expect(c.seen).toEqual([]);
  });

  it('forgets a member that leaves, and an empty group', () => {
    const groups = createZoomGroups();
    const [a, b] = [member(), member()];
    const leaveA = groups.join('k', a);
    const leaveB = groups.join('k', b);
    leaveA();
    groups.broadcast('k', b, [1, 2]);
    expect(a.seen).toEqual([]);
    leaveB();
    expect(groups.size('k')).toBe(0);
  });
});
