/**
 * A p2p node in a process of its own, driven over IPC by its parent (the multi-process test, the benchmark).
 * Start: `fork('p2p/testing/peer-process.ts', [JSON options], { execArgv: ['--import', 'tsx'] })`.
 * It answers `{ id, cmd, ... }` messages with `{ id, ok, result }` or `{ id, ok: false, error: {name, message} }`,
 * and announces `{ event: 'ready', peerId, multiaddrs }` once started.
 */
import '../polyfill.ts';
import { createSwarmNode } from '../node/node.ts';
import type { SwarmNode, SwarmNodeOptions } from '../node/node.ts';
import type { SignedManifest } from '../protocols/weights/manifest.ts';
import { peerIdFromString } from '@libp2p/peer-id';

const BLAST_PROTOCOL = '/agentjet-bench/blast/1';

export type PeerCommand =
  | { cmd: 'dial'; address: string }
  | { cmd: 'presence' }
  | { cmd: 'connected' }
  | { cmd: 'publish-weights'; model: string; version: number; path: string; chunkSize?: number }
  /** Answers `{ stats, chunksByPath }`; `direct: false` keeps the bytes on the libp2p stream. */
  | { cmd: 'fetch-weights'; signed: SignedManifest; providers: string[]; destPath: string; direct?: boolean }
  | { cmd: 'infer-rtt'; peer: string; count: number }
  /** Benchmark baseline: receive `bytes` over a bare libp2p stream (same transport, no agentjet protocol). */
  | { cmd: 'blast-receive'; peer: string; bytes: number }
  /** CPU time this process has used, all threads (process.cpuUsage(), microseconds). */
  | { cmd: 'cpu-usage' }
  | { cmd: 'stop' };

interface PeerProcessOptions extends SwarmNodeOptions {
  /** Roles this peer announces (presence content is otherwise fixed). */
  roles?: string[];
}

const options = JSON.parse(process.argv[2] ?? '{}') as PeerProcessOptions;
const node = await createSwarmNode(options);

/** Sends as many bytes as the first message asks for, in 1 MiB writes, then closes. */
await node.libp2p.handle(BLAST_PROTOCOL, async (stream) => {
  for await (const chunk of stream) {
    const total = Number(new TextDecoder().decode(chunk instanceof Uint8Array ? chunk : chunk.subarray()));
    const block = new Uint8Array(1024 * 1024);
    for (let sent = 0; sent < total; sent += block.byteLength) {
      if (!stream.send(block.subarray(0, Math.min(block.byteLength, total - sent)))) await stream.onDrain();
    }
    await stream.close();
    return;
  }
});

node.infer.handle(async (request, emit) => {
  await emit({ echo: request });
});
await node.presence.setContent(() => ({
  roles: options.roles ?? ['client'],
  models: [],
  pool: { load: 0, capacity: 1 },
  clientScripts: [],
  gateway: { available: false },
}));

async function run(command: PeerCommand, swarmNode: SwarmNode): Promise<unknown> {
  switch (command.cmd) {
    case 'dial':
      return swarmNode.dial(command.address, { signal: AbortSignal.timeout(30_000) });
    case 'presence':
      return swarmNode.presence.list().map((entry) => ({ peerId: entry.peerId, roles: entry.announcement.roles }));
    case 'connected':
      return swarmNode.connectedPeers();
    case 'publish-weights':
      return swarmNode.weights.publish({
        model: command.model,
        version: command.version,
        source: { path: command.path },
        chunkSize: command.chunkSize,
        announce: false,
      });
    case 'fetch-weights': {
      const { stats, chunksByPath } = await swarmNode.weights.fetch(command.signed, { providers: command.providers, destPath: command.destPath, direct: command.direct });
      return { stats, chunksByPath };
    }
    case 'infer-rtt': {
      const rtts: number[] = [];
      for (let i = 0; i < command.count; i++) {
        const started = performance.now();
        for await (const _frame of swarmNode.infer.request(command.peer, { i })) {
          // one frame per request
        }
        rtts.push(performance.now() - started);
      }
      return rtts;
    }
    case 'blast-receive': {
      const stream = await swarmNode.libp2p.dialProtocol(peerIdFromString(command.peer), BLAST_PROTOCOL);
      const started = performance.now();
      stream.send(new TextEncoder().encode(String(command.bytes)));
      await stream.close();
      let received = 0;
      for await (const chunk of stream) received += chunk.byteLength;
      return { received, seconds: (performance.now() - started) / 1000 };
    }
    case 'cpu-usage':
      return process.cpuUsage();
    case 'stop':
      await swarmNode.stop();
      return null;
  }
}

process.on('message', (message: { id: number } & PeerCommand) => {
  run(message, node).then(
    (result) => {
      process.send?.({ id: message.id, ok: true, result });
      if (message.cmd === 'stop') process.disconnect();
    },
    (err: Error) => process.send?.({ id: message.id, ok: false, error: { name: err.name, message: err.message } }),
  );
});
// The parent going away ends this peer too.
process.on('disconnect', () => {
  void node.stop().finally(() => process.exit(0));
});
process.send?.({ event: 'ready', peerId: node.peerId, multiaddrs: node.multiaddrs() });
