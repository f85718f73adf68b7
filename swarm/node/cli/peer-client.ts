/**
 * How CLI commands reach the running peer on this machine: `<dataDir>/control.json` (written by the peer at start,
 * readable by this user only) gives the control API's URL and token.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
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
    let res: Response;
    try {
      res = await fetch(`${this.apiUrl}${path}`, {
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
    const json = (await res.json().catch(() => null)) as { error?: { name: string; message: string } } | null;
    if (!res.ok) {
      const name = json?.error?.name ?? 'HttpError';
      // The peer's error name (ModelNotHostedError, TaskSourceError, …) is what a user searches for: keep it in the line.
      throw new PeerRequestError(res.status, name, `${name}: ${json?.error?.message ?? `HTTP ${res.status}`}`);
    }
    return json as T;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
