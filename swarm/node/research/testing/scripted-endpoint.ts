/**
 * Test helper: a real HTTP server on 127.0.0.1 that speaks OpenAI chat completions (`POST /v1/chat/completions`)
 * and answers a scripted sequence of assistant contents, one per request, recording every request it got — so the
 * planner is tested over a real socket, its retries and their messages visible, without a language model.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One scripted answer: an assistant content, or a whole HTTP reply (an error status, a body that is not a completion). */
export type ScriptedReply = string | { status: number; body: unknown } | { rawBody: string; status?: number };

export interface RecordedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  /** The parsed JSON body (null when it was not JSON). */
  body: ChatRequestBody | null;
}

export interface ChatRequestBody {
  model?: string;
  max_tokens?: number;
  messages: { role: string; content: string }[];
}

export interface ScriptedEndpoint {
  /** OpenAI base URL, ending in /v1. */
  baseUrl: string;
  port: number;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export interface ScriptedEndpointOptions {
  /** When set, a request without `Authorization: Bearer <apiKey>` is answered 401 as OpenAI does. */
  apiKey?: string;
}

/** Requests past the end of the script are a test's mistake: they are answered 500 and say so. */
const EXHAUSTED_STATUS = 500;

export async function startScriptedEndpoint(script: readonly ScriptedReply[], options: ScriptedEndpointOptions = {}): Promise<ScriptedEndpoint> {
  const requests: RecordedRequest[] = [];
  let next = 0;
  const server = createServer((req, res) => {
    void handle(req, res);
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req);
    let body: ChatRequestBody | null = null;
    try {
      body = JSON.parse(text) as ChatRequestBody;
    } catch {
      body = null;
    }
    requests.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body });
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      return send(res, 404, openAiError(`no route ${req.method} ${req.url}`, 'not_found'));
    }
    if (options.apiKey !== undefined && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      return send(res, 401, openAiError('Incorrect API key provided.', 'invalid_api_key'));
    }
    const reply = script[next++];
    if (reply === undefined) return send(res, EXHAUSTED_STATUS, openAiError(`the script has only ${script.length} replies`, 'script_exhausted'));
    if (typeof reply === 'string') return send(res, 200, completion(body?.model ?? 'scripted', reply));
    if ('rawBody' in reply) {
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json' });
      res.end(reply.rawBody);
      return;
    }
    send(res, reply.status, reply.body);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        // Clients keep connections alive; close would wait for them otherwise.
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A base URL on 127.0.0.1 where nothing listens (a port bound and released again). */
export async function closedEndpointUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}/v1`;
}

function completion(model: string, content: string): unknown {
  return {
    id: 'chatcmpl-scripted',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  };
}

function openAiError(message: string, code: string): unknown {
  return { error: { message, type: 'invalid_request_error', param: null, code } };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
