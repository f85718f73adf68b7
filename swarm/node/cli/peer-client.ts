/**
 * How CLI commands reach the running peer on this machine: `<dataDir>/control.json` (written by the peer at start,
 * readable by this user only) gives the control API's URL and token.
 */
import { createWriteStream, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { z } from 'zod';
import { dataPaths, defaultDataDir } from '../paths.ts';
import type { OptionValues } from './command.ts';

export class PeerNotRunningError extends Error {
  override name = 'PeerNotRunningError';
}

export class PeerRequestError extends Error {
  override name = 'PeerRequestError';
  constructor(
    readonly status: number,
    readonly errorName: string,
    message: string,
  ) {
    super(message);
  }
}

const controlFileSchema = z.object({ pid: z.number(), token: z.string(), urls: z.object({ api: z.string() }) });

export const dataDirOption = { 'data-dir': { type: 'string' } } as const;
export const dataDirUsage = `  --data-dir DIR    the peer's data folder (default: ${defaultDataDir()})`;

export class PeerClient {
  constructor(
    readonly apiUrl: string,
    private readonly token: string,
  ) {}

  static fromDataDir(values: OptionValues): PeerClient {
    const dataDir = values['data-dir'] ? resolve(values['data-dir'] as string) : defaultDataDir();
    const file = dataPaths(dataDir).control;
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      throw new PeerNotRunningError(`no running peer found in ${dataDir} (no control.json); start one with \`agentjet serve\` or pass --data-dir`);
    }
    const parsed = controlFileSchema.safeParse(safeJson(text));
    if (!parsed.success) throw new PeerNotRunningError(`${file} is not a peer control file; is another program using this folder?`);
    return new PeerClient(parsed.data.urls.api, parsed.data.token);
  }

  /** GET a control-API path (below /api); the peer's error becomes a PeerRequestError. */
  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** Any control-API call (path below /api), with an optional JSON body. */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.send(method, path, body);
    const json = (await res.json().catch(() => null)) as unknown;
    if (!res.ok) throw requestError(res.status, json);
    return json as T;
  }

  /**
   * GET a control-API path (below /api) into `file`, streamed; written under a temporary name and renamed when
   * complete, so an interrupted download never leaves a file that looks whole. Returns the bytes written.
   */
  async download(path: string, file: string): Promise<number> {
    const res = await this.send('GET', path);
    if (!res.ok || !res.body) throw requestError(res.status, await res.json().catch(() => null));
    const partial = `${file}.partial`;
    try {
      await pipeline(Readable.fromWeb(res.body as WebReadableStream), createWriteStream(partial));
      renameSync(partial, file);
    } catch (err) {
      rmSync(partial, { force: true });
      throw err;
    }
    return statSync(file).size;
  }

  private async send(method: string, path: string, body?: unknown): Promise<Response> {
    try {
      return await fetch(`${this.apiUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new PeerNotRunningError(`the peer at ${this.apiUrl} does not answer; it may have stopped (start it with \`agentjet serve\`)`);
    }
  }
}

function requestError(status: number, json: unknown): PeerRequestError {
  const error = (json as { error?: { name: string; message: string } } | null)?.error;
  const name = error?.name ?? 'HttpError';
  // The peer's error name (ModelNotHostedError, TaskSourceError, …) is kept apart: the CLI prints it on its own line.
  return new PeerRequestError(status, name, error?.message ?? `HTTP ${status}`);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
