/**
 * A whole peer runtime (store, gateway, models, training, p2p) in a process of its own, for multi-process swarm
 * tests: `fork('runtime-process.ts', [JSON PeerOptions], { execArgv: ['--import', 'tsx'] })`. Unlike the CLI it
 * takes every PeerOptions field (a small training config, a fast presence period). It sends one IPC message
 * `{ event: 'ready', ... }` (RuntimeReady) once started, and stops when the parent disconnects or on SIGTERM.
 */
import '../../../../p2p/polyfill.ts';
import { PeerRuntime, type PeerOptions } from '../../runtime.ts';

export interface RuntimeReady {
  event: 'ready';
  port: number;
  token: string;
  gatewayUrl: string;
  peerId: string;
  addresses: string[];
}

const runtime = await PeerRuntime.start(JSON.parse(process.argv[2] ?? '{}') as PeerOptions);
let stopping: Promise<void> | undefined;
const stop = () => {
  stopping ??= runtime.stop().finally(() => process.exit(0));
  return stopping;
};
process.on('disconnect', () => void stop());
process.on('SIGTERM', () => void stop());
const ready: RuntimeReady = {
  event: 'ready',
  port: runtime.port,
  token: runtime.token,
  gatewayUrl: runtime.urls.gateway,
  peerId: runtime.p2p?.node.peerId ?? '',
  addresses: runtime.p2p?.node.multiaddrs() ?? [],
};
process.send?.(ready);
