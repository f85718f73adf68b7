/**
 * The control API's WebSocket (/api/events?token=…): pushes the status on connect and once a second, and every
 * ServerEvent the runtime publishes. A wrong token is refused before the upgrade with 401. The HTTP server has
 * checked Host and Origin before handing the upgrade here (http/server.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { ServerEvent, StatusPayload } from '../../common/api.ts';
import { parseRequestTarget } from '../http/edge.ts';
import { tokensEqual } from './auth.ts';

/** Status pushes: often enough that uptime and pool counts look live, rare enough to cost nothing. */
const STATUS_INTERVAL_MS = 1000;
/** A slow client whose send buffer grows past this is dropped rather than slowing the peer. */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

export class EventHub {
  private readonly wss = new WebSocketServer({ noServer: true });
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly token: string,
    private readonly status: () => StatusPayload,
  ) {
    this.timer = setInterval(() => this.broadcast({ type: 'status', data: this.status() }), STATUS_INTERVAL_MS);
    this.timer.unref();
  }

  /** Returns false when the upgrade is not ours (another path), so the caller can pass it on. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    let url: URL;
    try {
      url = parseRequestTarget(req.url);
    } catch {
      return false;
    }
    if (url.pathname !== '/api/events') return false;
    const token = url.searchParams.get('token') ?? '';
    if (!tokensEqual(token, this.token)) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return true;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      // A malformed frame from the client is an 'error' on the socket; with no listener it would end the process.
      ws.on('error', () => ws.terminate());
      this.send(ws, { type: 'status', data: this.status() });
    });
    return true;
  }

  broadcast(event: ServerEvent): void {
    if (this.wss.clients.size === 0) return;
    const text = JSON.stringify(event);
    for (const ws of this.wss.clients) this.sendText(ws, text);
  }

  get clientCount(): number {
    return this.wss.clients.size;
  }

  close(): void {
    clearInterval(this.timer);
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }

  private send(ws: WebSocket, event: ServerEvent) {
    this.sendText(ws, JSON.stringify(event));
  }

  private sendText(ws: WebSocket, text: string) {
    if (ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      ws.terminate();
      return;
    }
    ws.send(text);
  }
}
