/**
 * Raw HTTP/1.1 over a socket, for requests no HTTP client will send (`GET //[`, malformed percent-encoding, forged
 * Host headers, upgrades): the text goes out as written, and the answer is read until the server closes.
 */
import { connect } from 'node:net';

export interface RawResponse {
  /** 0 when the server closed without answering. */
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A deadline of its own, so a server that never answers fails the test instead of hanging it. */
const RAW_REQUEST_TIMEOUT_MS = 10_000;

/** `head` is the request line and headers without the final blank line; `Connection: close` unless it has one. */
export function rawRequest(port: number, head: string, body = ''): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(RAW_REQUEST_TIMEOUT_MS, () => {
      socket.destroy();
      reject(new Error(`no answer within ${RAW_REQUEST_TIMEOUT_MS} ms to ${head.split('\r\n')[0]}`));
    });
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', (err) => {
      // A reset after the answer arrived is how some refusals end; the answer is what counts.
      if (chunks.length > 0) resolve(parse(Buffer.concat(chunks).toString('latin1')));
      else reject(err);
    });
    socket.on('close', () => resolve(parse(Buffer.concat(chunks).toString('latin1'))));
    const connection = /\r\nconnection:/i.test(head) ? '' : 'Connection: close\r\n';
    socket.write(`${head}\r\n${connection}\r\n${body}`);
  });
}

/** GET `target` with Host 127.0.0.1 and whatever extra header lines. */
export function rawGet(port: number, target: string, extraHeaders: string[] = []): Promise<RawResponse> {
  return rawRequest(port, [`GET ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`, ...extraHeaders].join('\r\n'));
}

function parse(text: string): RawResponse {
  if (text === '') return { status: 0, headers: {}, body: '' };
  const split = text.indexOf('\r\n\r\n');
  const head = split < 0 ? text : text.slice(0, split);
  const rest = split < 0 ? '' : text.slice(split + 4);
  const [statusLine, ...lines] = head.split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const body = headers['transfer-encoding'] === 'chunked' ? dechunk(rest) : rest;
  return { status, headers, body };
}

function dechunk(text: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const eol = text.indexOf('\r\n', at);
    if (eol < 0) return out;
    const size = parseInt(text.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}
