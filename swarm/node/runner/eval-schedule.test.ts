/** Held-out evals every N steps, as the server asks at each episode start (AttachedClient.serverAt, episodeSpecs). */
import { describe, expect, it } from 'vitest';
import { AttachedClient } from './attached-client.ts';
import { episodeSpecs } from './tasks.ts';

const train = (id: string) => ({ spec: { task: { id }, taskId: id, kind: 'train' as const }, attempt: 0, notBefore: 0, order: Number(id.slice(1)) });

describe('evals every N steps', () => {
  it('queues every held-out task once per step bucket, ahead of queued train tasks', () => {
    const client = new AttachedClient('c');
    client.queue.push(train('t1'), train('t2'));
    client.noteHeldOut({ id: 'e1', split: 'eval' });
    client.noteHeldOut({ id: 'e2', split: 'eval' });
    client.serverAt(0, 5);
    expect(client.queue.map((q) => `${q.spec.kind}:${q.spec.taskId}`)).toEqual(['eval:e1', 'eval:e2', 'train:t1', 'train:t2']);
    client.queue.splice(0, 2);
    client.serverAt(4, 5);
    expect(client.queue.filter((q) => q.spec.kind === 'eval')).toEqual([]);
    client.serverAt(5, 5);
    expect(client.queue.filter((q) => q.spec.kind === 'eval').map((q) => q.spec.taskId)).toEqual(['e1', 'e2']);
  });

  it('runs a held-out task seen after its bucket began on the same weights, and leaves the pass alone without an interval', () => {
    const client = new AttachedClient('c');
    expect(client.noteHeldOut({ id: 'e1', split: 'eval' })).toBe(false);
    client.serverAt(3, 2);
    expect(client.queue.map((q) => q.spec.taskId)).toEqual(['e1']);
    expect(client.noteHeldOut({ id: 'e2', split: 'eval' })).toBe(true);
    expect(client.queue.map((q) => q.spec.taskId)).toEqual(['e1', 'e2']);
  });

  it('skips the held-out tasks at the end of a pass when evals every N steps take them', async () => {
    const tasks = [{ id: 'a' }, { id: 'h', split: 'eval' }];
    const pass = async function* () {
      yield* tasks;
    };
    const kinds = async (skip: boolean) => {
      const out: string[] = [];
      for await (const spec of episodeSpecs(pass, 1, 1, () => skip)) out.push(`${spec.kind}:${spec.taskId}`);
      return out;
    };
    expect(await kinds(false)).toEqual(['train:a', 'eval:h']);
    expect(await kinds(true)).toEqual(['train:a']);
  });
});
