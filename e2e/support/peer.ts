/**
 * A real headless peer for the tests: `agentjet node --json --port 0` in a temporary data directory, started
 * by the same module the Electron shell uses (electron/peer-process.ts), under plain Node.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PeerReadyLine } from '../../swarm/common/api.ts';
import { startPeerProcess, type PeerProcess } from '../../electron/peer-process.ts';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface RunningPeer extends PeerProcess {
  /** `http://127.0.0.1:PORT`, the origin that serves the UI. */
  origin: string;
}

/** `extraArgs` go to `agentjet node`, e.g. `['--model', 'builtin:tiny']` for a peer that hosts a model. */
export async function startPeer(extraArgs: string[] = []): Promise<RunningPeer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'agentjet-e2e-'));
  let peer: PeerProcess;
  try {
    peer = await startPeerProcess({ appRoot: REPO_ROOT, execPath: process.execPath, dataDir, extraArgs });
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    ...peer,
    origin: new URL(peer.uiUrl).origin,
    async stop() {
      await peer.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** GET an API path with the peer's token, parsed as JSON. */
export async function apiGet<T>(peer: PeerReadyLine, apiPath: string): Promise<T> {
  const response = await fetch(`${peer.apiUrl}${apiPath}`, { headers: { Authorization: `Bearer ${peer.token}` } });
  if (!response.ok) throw new Error(`GET ${apiPath}: HTTP ${response.status}`);
  return (await response.json()) as T;
}
