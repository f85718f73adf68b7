import { afterEach, describe, expect, it } from 'vitest';
import { testNodes } from '../../testing/nodes.ts';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

describe('/agentjet/trajectories/1', () => {
  it('streams the requested records once each, across duplicate sends and several peers', async () => {
    const first = await nodes.start();
    const second = await nodes.start();
    const client = await nodes.start();
    await client.dial(first.multiaddrs()[0]);
    await client.dial(second.multiaddrs()[0]);
    const asked: string[][] = [];
    first.trajectories.handle(async (ids, emit) => {
      asked.push(ids);
      // A buggy data source sends ep-1 twice and knows nothing of ep-3.
      for (const id of ['ep-1', 'ep-2', 'ep-1']) if (ids.includes(id)) await emit({ id, tokens: [1, 2, 3], reward: 0.5 });
    });
    second.trajectories.handle(async (ids, emit) => {
      asked.push(ids);
      for (const id of ids) await emit({ id, tokens: [9], reward: 1 });
    });
    const records = [];
    for await (const record of client.trajectories.fetch([first.peerId, second.peerId], ['ep-1', 'ep-2', 'ep-3'])) records.push(record);
    expect(records.map((r) => r.id)).toEqual(['ep-1', 'ep-2', 'ep-3']);
    expect(records[0]).toEqual({ id: 'ep-1', tokens: [1, 2, 3], reward: 0.5 });
    // The second peer was asked only for what the first lacked.
    expect(asked).toEqual([['ep-1', 'ep-2', 'ep-3'], ['ep-3']]);
  });

  it('rejects a record that was not asked for', async () => {
    const server = await nodes.start();
    const client = await nodes.start();
    await client.dial(server.multiaddrs()[0]);
    server.trajectories.handle(async (_ids, emit) => {
      await emit({ id: 'someone-else' });
    });
    await expect(client.trajectories.fetch(server.peerId, ['ep-1']).next()).rejects.toMatchObject({ name: 'InvalidTrajectoryRecordError' });
  });
});
