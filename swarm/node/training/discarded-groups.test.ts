import { describe, expect, it } from 'vitest';
import { DiscardedGroups } from './discarded-groups.ts';

describe('groups left out as uniform', () => {
  it('counts each group once per step and warns when most recent groups were left out', () => {
    const groups = new DiscardedGroups();
    expect(groups.add('a')).toBe(true);
    expect(groups.add('a')).toBe(false);
    expect(groups.count).toBe(1);
    // Too few groups for a share to mean anything.
    expect(groups.warning()).toBeNull();
    for (const id of ['b', 'c', 'd', 'e', 'f']) groups.add(id);
    groups.stepDone(2);
    expect(groups.count).toBe(0);
    expect(groups.warning()?.code).toBe('mostly_discarded');
    // Steps that train on every group dilute the window until the warning goes.
    for (let i = 0; i < 5; i++) groups.stepDone(4);
    expect(groups.warning()).toBeNull();
  });
});
