/**
 * Parent side of peer-child.ts: a real peer in a child process on 127.0.0.1, a raw-socket HTTP client that sends
 * any bytes at it (the fuzz's requests are often not HTTP a library would send), and IPC snapshots of its state.
 * A crash shows as the child's exit or as its unhandled-rejection count; either way the parent survives to say so.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Loopback only: the fuzz never sends a byte to any other address. */
export const FUZZ_HOST = '127.0.0.1';
/** Starting the peer loads the tiny model in a worker thread; a loaded CI machine can take this long. */
const START_TIMEOUT_MS = 60_000;
/** A snapshot is a few COUNT(*) queries; past this the child is wedged, which is itself a finding. */
const SNAPSHOT_TIMEOUT_MS = 10_000;
/** A SIGTERM'd peer closes its engine and SQLite; past this it is killed. */
const STOP_TIMEOUT_MS = 10_000;
/** Answers are read up to this many bytes (a chat answer or an export is far smaller); the rest is dropped. */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
/** Bytes of the answer's body kept for the report (the error's name sits at its start). */
const KEPT_BODY_BYTES = 512;

export interface ChildReady {
  type: 'ready';
  port: number;
  token: string;
}
export type ChildRequest = { type: 'snapshot'; id: number };
/** What a rejected request must leave as it was: store counts, in-memory episodes, the status fields that act. */
export interface PeerState {
  episodesByState: Record<string, number>;
  calls: number;
  timelines: number;
  trainSteps: number;
  clientScripts: number;
  clientRuns: number;
  clientKeys: number;
  activeEpisodes: number;
  status: unknown;
}
export interface ChildSnapshot {
  crashes: number;
  crashReasons: string[];
  /** The peer's newest error log lines. */
  errorLines: string[];
  state: PeerState;
}

export interface RawResponse {
  /** 0 when the peer closed the connection without an answer (its HTTP parser refused the bytes, or a timeout). */
  status: number;
  /** `error.name` (control/swarm shape) or `error.code` (OpenAI shape), when the answer carried one. */
  errorName: string | null;
  body: string;
  timedOut: boolean;
}

/** A client that goes away: as soon as its bytes are written, or once the first byte of the answer arrives. */
export type HangUp = 'after-write' | 'after-first-byte';

export interface FuzzPeer {
  port: number;
  token: string;
  child: ChildProcess;
  /** Whether the child has exited (a crash, unless stop() did it). */
  exited(): boolean;
  exitReason(): string | null;
  snapshot(): Promise<ChildSnapshot>;
  /**
   * Sends `bytes` on a fresh connection and reads the answer until the peer closes or `timeoutMs`. `halfClose`
   * ends our side after the bytes (raw requests whose length the peer cannot know); without it a well-formed
   * request with `Connection: close` is answered in full (the gateway takes a half-close for a client hanging up).
   */
  send(bytes: Buffer, timeoutMs: number, halfClose?: boolean, hangUp?: HangUp): Promise<RawResponse>;
  stop(): Promise<void>;
}

const script = fileURLToPath(new URL('./peer-child.ts', import.meta.url));

export async function startFuzzPeer(): Promise<FuzzPeer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'agentjet-fuzz-'));
  const child = fork(script, [dataDir], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
  let stderrTail = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderrTail = (stderrTail + chunk.toString('utf8')).slice(-4096);
  });
  let exit: string | null = null;
  const exited = once(child, 'exit').then(([code, signal]) => {
    exit = `exit code ${code as number | null}, signal ${signal as string | null}; stderr: ${stderrTail}`;
  });
  const ready = await new Promise<ChildReady>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fuzz peer did not start in ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    child.on('message', (m: { type?: string }) => {
      if (m.type === 'ready') {
        clearTimeout(timer);
        resolve(m as ChildReady);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`fuzz peer exited before it was ready: ${exit}`));
    });
  });

  let nextId = 0;
  const pending = new Map<number, (s: ChildSnapshot) => void>();
  child.on('message', (m: { type?: string; id?: number; snapshot?: ChildSnapshot }) => {
    if (m.type === 'snapshot' && m.id !== undefined) pending.get(m.id)?.(m.snapshot!);
  });

  return {
    port: ready.port,
    token: ready.token,
    child,
    exited: () => exit !== null,
    exitReason: () => exit,
    snapshot() {
      const id = nextId++;
      return new Promise<ChildSnapshot>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`no snapshot from the fuzz peer in ${SNAPSHOT_TIMEOUT_MS} ms`));
        }, SNAPSHOT_TIMEOUT_MS);
        pending.set(id, (s) => {
          clearTimeout(timer);
          pending.delete(id);
          resolve(s);
        });
        if (!child.connected) {
          clearTimeout(timer);
          reject(new Error(`the fuzz peer is gone: ${exit}`));
          return;
        }
        child.send({ type: 'snapshot', id } satisfies ChildRequest);
      });
    },
    send: (bytes, timeoutMs, halfClose = false, hangUp) => sendRaw(ready.port, bytes, timeoutMs, halfClose, hangUp),
    async stop() {
      if (exit === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export function sendRaw(port: number, bytes: Buffer, timeoutMs: number, halfClose: boolean, hangUp?: HangUp): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = connect({ host: FUZZ_HOST, port });
    const chunks: Buffer[] = [];
    let size = 0;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, timeoutMs);
    socket.on('connect', () => {
      // The peer may answer (and close) before it has read everything: that write error is expected.
      socket.write(bytes, () => {
        if (hangUp === 'after-write') socket.destroy();
        else if (halfClose) socket.end();
      });
    });
    socket.on('data', (chunk: Buffer) => {
      if (size < MAX_RESPONSE_BYTES) chunks.push(chunk);
      size += chunk.length;
      // A complete answer ends the exchange even on a connection the peer keeps open (an SSE stream's keep-alive).
      if (hangUp === 'after-first-byte' || size >= MAX_RESPONSE_BYTES || responseComplete(Buffer.concat(chunks))) socket.destroy();
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parseResponse(Buffer.concat(chunks), timedOut));
    });
  });
}

/** Whether `raw` holds a whole final answer: its Content-Length reached, or its chunked body's last chunk. */
function responseComplete(raw: Buffer): boolean {
  let text = raw.toString('latin1');
  while (/^HTTP\/1\.[01] 1\d\d /.test(text) && text.includes('\r\n\r\n')) text = text.slice(text.indexOf('\r\n\r\n') + 4);
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd < 0) return false;
  const head = text.slice(0, headEnd).toLowerCase();
  const body = text.slice(headEnd + 4);
  if (/\r\ntransfer-encoding:[^\r]*chunked/.test(head)) return body.startsWith('0\r\n\r\n') || body.endsWith('\r\n0\r\n\r\n');
  const length = /\r\ncontent-length: *(\d+)/.exec(head);
  return length !== null && Buffer.byteLength(body, 'latin1') >= Number(length[1]);
}

function parseResponse(raw: Buffer, timedOut: boolean): RawResponse {
  let text = raw.toString('latin1');
  // Interim answers (100 Continue) come first; the final one is what the request got.
  while (/^HTTP\/1\.[01] 1\d\d /.test(text) && text.includes('\r\n\r\n')) {
    const skip = text.indexOf('\r\n\r\n') + 4;
    text = text.slice(skip);
    raw = raw.subarray(skip);
  }
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  const status = match ? Number(match[1]) : 0;
  const headEnd = text.indexOf('\r\n\r\n');
  const body = headEnd >= 0 ? raw.subarray(headEnd + 4).toString('utf8') : '';
  let errorName: string | null = null;
  try {
    const parsed = JSON.parse(body) as { error?: { name?: unknown; code?: unknown } };
    const name = parsed.error?.name ?? parsed.error?.code;
    if (typeof name === 'string') errorName = name;
  } catch {
    // Not JSON (an SSE stream, the HTTP parser's bare 400, a chunked body): the status says enough.
  }
  return { status, errorName, body: body.slice(0, KEPT_BODY_BYTES), timedOut };
}
