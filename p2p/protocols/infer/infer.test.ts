import { afterEach, describe, expect, it } from 'vitest';
import { eventually, testNodes } from '../../testing/nodes.ts';
import type { SwarmNode } from '../../node/node.ts';
import { json, rawExchange } from '../shared/raw-client.ts';
import { INFER_PROTOCOL } from './constants.ts';

const nodes = testNodes();
afterEach(() => nodes.cleanup());

async function pair(): Promise<[SwarmNode, SwarmNode]> {
  const server = await nodes.start();
  const client = await nodes.start();
  await client.dial(server.multiaddrs()[0]);
  return [server, client];
}

describe('/agentjet/infer/1', () => {
  it('streams the handler frames to the client in order, then ends', async () => {
    const [server, client] = await pair();
    server.infer.handle(async (request, emit, _signal, context) => {
      for (const token of ['Hel', 'lo', '!']) await emit({ delta: token, model: request.model, from: context.peerId });
    });
    const frames = [];
    for await (const frame of client.infer.request(server.peerId, { model: 'tiny', messages: [] })) frames.push(frame);
    expect(frames).toEqual(['Hel', 'lo', '!'].map((delta) => ({ delta, model: 'tiny', from: client.peerId })));
  });

  it('cancels the server handler when the client stops reading', async () => {
    const [server, client] = await pair();
    let handlerSawAbort: (value: string) => void = () => {};
    const aborted = new Promise<string>((resolve) => (handlerSawAbort = resolve));
    server.infer.handle(async (_request, emit, signal) => {
      signal.addEventListener('abort', () => handlerSawAbort(signal.reason?.name ?? 'aborted'));
      for (let i = 0; signal.aborted === false; i++) {
        await emit({ i }).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    });
    const received = [];
    for await (const frame of client.infer.request(server.peerId, {})) {
      received.push(frame);
      if (received.length === 3) break;
    }
    expect(received).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(await aborted).toBe('StreamAbortedError');
  });

  it('stops the client when its signal aborts mid-stream', async () => {
    const [server, client] = await pair();
    server.infer.handle(async (_request, emit, signal) => {
      await emit({ first: true });
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
    });
    const controller = new AbortController();
    const frames: unknown[] = [];
    const reading = (async () => {
      for await (const frame of client.infer.request(server.peerId, {}, { signal: controller.signal })) {
        frames.push(frame);
        controller.abort();
      }
    })();
    await expect(reading).rejects.toMatchObject({ name: 'StreamAbortedError' });
    expect(frames).toEqual([{ first: true }]);
  });

  it("rethrows the handler's error on the client under the same name", async () => {
    const [server, client] = await pair();
    class ModelNotHostedError extends Error {
      override name = 'ModelNotHostedError';
    }
    server.infer.handle(async (_request, emit) => {
      await emit({ partial: 1 });
      throw new ModelNotHostedError('no such model');
    });
    const frames: unknown[] = [];
    const reading = (async () => {
      for await (const frame of client.infer.request(server.peerId, {})) frames.push(frame);
    })();
    await expect(reading).rejects.toMatchObject({ name: 'ModelNotHostedError' });
    expect(frames).toEqual([{ partial: 1 }]);
  });

  it('answers NoHandlerError when the peer serves no inference', async () => {
    const [server, client] = await pair();
    const reading = client.infer.request(server.peerId, {}).next();
    await expect(reading).rejects.toMatchObject({ name: 'NoHandlerError' });
  });

  it('refuses a request that is not a JSON object, or too large, before sending it', async () => {
    const [server, client] = await pair();
    server.infer.handle(async () => {});
    await expect(client.infer.request(server.peerId, { big: 'x'.repeat(5 * 1024 * 1024) }).next()).rejects.toMatchObject({ name: 'InvalidRequestError' });
  });

  it('answers garbage, oversized frames and unknown versions with an error frame, then hangs up on a repeat offender', async () => {
    const [server, client] = await pair();
    let calls = 0;
    server.infer.handle(async () => {
      calls += 1;
    });
    const garbage = await rawExchange(client.libp2p, server.libp2p.peerId, INFER_PROTOCOL, [new Uint8Array([1, 2, 3, 250])]);
    expect(garbage.frames).toEqual([expect.objectContaining({ t: 'error', name: 'InvalidFrameError' })]);

    const oversized = new Uint8Array(4);
    new DataView(oversized.buffer).setUint32(0, 512 * 1024 * 1024);
    const tooLarge = await rawExchange(client.libp2p, server.libp2p.peerId, INFER_PROTOCOL, [oversized], { framed: false });
    expect(tooLarge.frames).toEqual([expect.objectContaining({ t: 'error', name: 'FrameTooLargeError' })]);

    expect(server.violations.count(client.libp2p.peerId)).toBe(2);
    const future = await rawExchange(client.libp2p, server.libp2p.peerId, INFER_PROTOCOL, [json({ v: 2, body: {} })]);
    expect(future.frames).toEqual([expect.objectContaining({ t: 'error', name: 'UnsupportedVersionError' })]);
    // The third violation crosses the limit: the server hangs up on the client.
    await eventually(() => !server.connectedPeers().includes(client.peerId));
    expect(calls).toBe(0);
  });
});
