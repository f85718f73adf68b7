/**
 * Runs the peer runtime (`bin/agentjet.mjs node --json --port 0`) as a child process of the shell, through the
 * one peer starter (swarm/node/cli/peer-process.ts). Used by the Electron shell (with Electron's own Node,
 * ELECTRON_RUN_AS_NODE=1) and by the e2e tests (with plain Node). Knows nothing about Electron.
 */
import path from 'node:path';
import type { PeerReadyLine } from '../swarm/common/api.ts';
import { startPeerProcess as startCliPeer, type PeerProcess as CliPeerProcess } from '../swarm/node/cli/peer-process.ts';

/** The ready line's fields at the top level: the shell reads `peer.uiUrl`, `peer.token` directly. */
export interface PeerProcess extends PeerReadyLine {
  child: CliPeerProcess['child'];
  /** Everything the peer wrote to stderr so far (its human log, the tail). */
  stderr(): string;
  /** SIGTERM, then SIGKILL after a grace period. Safe to call twice; resolves when the process is gone. */
  stop(): Promise<void>;
}

export interface PeerProcessOptions {
  /** The repository (or packaged app) root holding `bin/agentjet.mjs`. */
  appRoot: string;
  /** The Node executable: `process.execPath` (Node, or Electron with ELECTRON_RUN_AS_NODE=1). */
  execPath: string;
  dataDir?: string;
  port?: number;
  extraArgs?: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Each stderr line, as it arrives (the shell forwards them to its own log). */
  onStderrLine?: (line: string) => void;
  readyTimeoutMs?: number;
}

export async function startPeerProcess(options: PeerProcessOptions): Promise<PeerProcess> {
  const args = ['node', '--port', String(options.port ?? 0)];
  if (options.dataDir) args.push('--data-dir', options.dataDir);
  args.push(...(options.extraArgs ?? []));
  const peer = await startCliPeer(args, {
    execPath: options.execPath,
    bin: path.join(options.appRoot, 'bin', 'agentjet.mjs'),
    cwd: options.appRoot,
    env: options.env,
    onStderrLine: options.onStderrLine,
    readyTimeoutMs: options.readyTimeoutMs,
  });
  return {
    ...peer.ready,
    child: peer.child,
    stderr: () => peer.stderr(),
    stop: async () => void (await peer.stop()),
  };
}
