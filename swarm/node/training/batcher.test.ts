import { describe, expect, it } from 'vitest';
import { Batcher, type BatchEpisode, type EpisodeMark } from './batcher.ts';

const config = { batchTasks: 2, groupSize: 3, excludeUniformGroups: true, maxPolicyLag: 1 };

let counter = 0;
function episode(groupId: string, reward: number | null, overrides: Partial<BatchEpisode> = {}): BatchEpisode {
  return { episodeId: `e${counter++}`, groupId, kind: 'train', outcome: 'ended', reward, policyVersion: 0, ...overrides };
}

function setup(overrides: Partial<typeof config> = {}) {
  const marks: EpisodeMark[] = [];
  const batcher = new Batcher({ ...config, ...overrides }, (m) => marks.push(m));
  return { batcher, marks };
}

describe('Batcher', () => {
  it('is ready once batchTasks groups each have groupSize finished episodes, grouped by task id', () => {
    const { batcher } = setup();
    for (const r of [1, 0]) batcher.add(episode('a', r), 0);
    for (const r of [1, 0, 0]) batcher.add(episode('b', r), 0);
    expect(batcher.ready).toBe(false);
    batcher.add(episode('a', 1), 0);
    expect(batcher.ready).toBe(true);

    const batch = batcher.takeBatch(0)!;
    expect(batch.map((g) => g.groupId)).toEqual(['b', 'a']);
    for (const group of batch) {
      expect(group.episodes).toHaveLength(3);
      expect(group.episodes.every((e) => e.groupId === group.groupId)).toBe(true);
    }
    expect(batcher.ready).toBe(false);
    expect(batcher.takeBatch(0)).toBeNull();
  });

  it('excludes groups whose rewards are all equal and marks their episodes', () => {
    const { batcher, marks } = setup();
    const uniform = [episode('u', 1), episode('u', 1), episode('u', 1)];
    for (const e of uniform) batcher.add(e, 0);
    expect(batcher.counts()).toEqual({ queuedEpisodes: 0, completeGroups: 0 });
    expect(marks.map((m) => [m.episodeId, m.disposition])).toEqual(uniform.map((e) => [e.episodeId, 'excluded-uniform-reward']));
  });

  it('keeps uniform groups when excludeUniformGroups is off', () => {
    const { batcher, marks } = setup({ excludeUniformGroups: false, batchTasks: 1 });
    for (let i = 0; i < 3; i++) batcher.add(episode('u', 0.5), 0);
    expect(batcher.ready).toBe(true);
    expect(marks).toEqual([]);
  });

  it('never uses eval, aborted or reward-less episodes, and says so', () => {
    const { batcher, marks } = setup({ batchTasks: 1 });
    expect(batcher.add(episode('a', 1, { kind: 'eval' }), 0)).toBe('ignored-eval');
    expect(batcher.add(episode('a', null, { outcome: 'aborted' }), 0)).toBe('ignored-aborted');
    expect(batcher.add(episode('a', null), 0)).toBe('ignored-no-reward');
    expect(batcher.counts().queuedEpisodes).toBe(0);
    expect(marks.map((m) => m.disposition)).toEqual(['ignored-eval', 'ignored-aborted', 'ignored-no-reward']);
    // Two train episodes plus the ignored ones do not make a group of three.
    batcher.add(episode('a', 1), 0);
    batcher.add(episode('a', 0), 0);
    expect(batcher.ready).toBe(false);
  });

  it('ignores an episode offered twice', () => {
    const { batcher } = setup();
    const e = episode('a', 1);
    expect(batcher.add(e, 0)).toBe('queued');
    expect(batcher.add(e, 0)).toBe('duplicate');
    expect(batcher.counts().queuedEpisodes).toBe(1);
  });

  it("lets a late episode of a trained group start that task's next group", () => {
    const { batcher } = setup({ batchTasks: 1 });
    for (const r of [1, 0, 0]) batcher.add(episode('a', r), 0);
    const late = episode('a', 1, { policyVersion: 0 });
    batcher.add(late, 0);
    expect(batcher.takeBatch(0)![0].episodes).not.toContain(late);
    // The step produced version 1: the late episode (version 0) is within the lag and waits for its group.
    expect(batcher.counts().queuedEpisodes).toBe(1);
    batcher.add(episode('a', 0, { policyVersion: 1 }), 1);
    batcher.add(episode('a', 0, { policyVersion: 1 }), 1);
    expect(batcher.takeBatch(1)![0].episodes[0]).toBe(late);
  });

  it('drops episodes sampled more than maxPolicyLag versions ago, on arrival and while waiting', () => {
    const { batcher, marks } = setup();
    expect(batcher.add(episode('a', 1, { policyVersion: 0 }), 2)).toBe('dropped-stale');
    const waiting = episode('b', 1, { policyVersion: 2 });
    batcher.add(waiting, 2);
    expect(batcher.takeBatch(4)).toBeNull();
    expect(batcher.counts().queuedEpisodes).toBe(0);
    expect(marks.filter((m) => m.disposition === 'dropped-stale')).toHaveLength(2);
    expect(marks.at(-1)!.episodeId).toBe(waiting.episodeId);
  });
});
