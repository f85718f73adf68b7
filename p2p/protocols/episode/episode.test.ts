import { afterEach, describe, expect, it } from 'vitest';
import { testNodes } from '../../testing/nodes.ts';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

describe('/agentjet/episode/1', () => {
  it("carries the caller's begin/end payloads and returns the server's answer", async () => {
    const server = await nodes.start();
    const client = await nodes.start();
    await client.dial(server.multiaddrs()[0]);
    const seen: unknown[] = [];
    server.episode.handle(async (message, { peerId }) => {
      seen.push({ message, peerId });
      if (message.type === 'begin') return { episodeId: 'ep-1', model: 'tiny' };
      if (message.type === 'end') return { accepted: true };
      throw Object.assign(new Error('unknown episode'), { name: 'UnknownEpisodeError' });
    });
    expect(await client.episode.request(server.peerId, { type: 'begin', task: 'count' })).toEqual({ episodeId: 'ep-1', model: 'tiny' });
    expect(await client.episode.request(server.peerId, { type: 'end', episodeId: 'ep-1', reward: 1 })).toEqual({ accepted: true });
    await expect(client.episode.request(server.peerId, { type: 'abort', episodeId: 'nope' })).rejects.toMatchObject({ name: 'UnknownEpisodeError' });
    expect(seen).toHaveLength(3);
    expect(seen[0]).toEqual({ message: { type: 'begin', task: 'count' }, peerId: client.peerId });
  });
});
