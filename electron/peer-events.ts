/**
 * The shell's own connection to the peer's event stream (WebSocket /api/events): the tray follows the status,
 * notifications come from RunNotices. Reconnects with backoff while the peer restarts; reports `null` status while
 * disconnected. No Electron import (tested under vitest against a real peer runtime).
 */
import WebSocket from 'ws';
import type { ServerEvent, StatusPayload } from '../swarm/common/api.ts';
import { RunNotices, trainingStateSchema, type DesktopNotice } from './run-notices.ts';

/** Reconnect delays: quick at first (a restarting peer is back in a second), then every few seconds. */
const RECONNECT_MS = [250, 500, 1_000, 2_000, 5_000];
/** A training state read answers in milliseconds on loopback; one that hangs must not hold up later notices. */
const TRAINING_READ_TIMEOUT_MS = 10_000;

export interface PeerEventsOptions {
  /** The control API root, `http://127.0.0.1:PORT/api`. */
  apiUrl: string;
  token: string;
  onStatus(status: StatusPayload | null): void;
  onNotice(notice: DesktopNotice): void;
  /** Problems worth a line in the shell's log (a training state that could not be read). */
  onWarning?(message: string): void;
}

export interface PeerEvents {
  close(): void;
}

export function watchPeerEvents(options: PeerEventsOptions): PeerEvents {
  const notices = new RunNotices();
  const eventsUrl = `${options.apiUrl.replace(/^http/, 'ws')}/events?token=${encodeURIComponent(options.token)}`;
  let socket: WebSocket | null = null;
  let attempt = 0;
  let timer: NodeJS.Timeout | null = null;
  let closed = false;

  const connect = () => {
    socket = new WebSocket(eventsUrl);
    socket.on('open', () => {
      attempt = 0;
    });
    socket.on('message', (data) => {
      const event = parseEvent(data.toString());
      if (event) handle(event);
    });
    socket.on('error', () => {
      // 'close' follows; the reconnect is scheduled there.
    });
    socket.on('close', () => {
      socket = null;
      if (closed) return;
      options.onStatus(null);
      timer = setTimeout(connect, RECONNECT_MS[Math.min(attempt++, RECONNECT_MS.length - 1)]);
    });
  };

  // Events are turned into notices one after another, each waiting for the training reads it asked for: notices
  // come out in the order of their events, and two reads of one model's state cannot land out of order (an older
  // "running" after "finished" would announce the finish twice).
  let noticesDone: Promise<void> = Promise.resolve();
  // An event of an unexpected shape (another version of the peer) must not take the shell down, nor (thrown inside
  // the chain) stop every later notice.
  const ignored = (event: ServerEvent, error: unknown) => options.onWarning?.(`ignored a ${event.type} event: ${String(error)}`);
  const handle = (event: ServerEvent) => {
    try {
      if (event.type === 'status') options.onStatus(event.data);
    } catch (error) {
      ignored(event, error);
    }
    noticesDone = noticesDone.then(async () => {
      if (closed) return;
      try {
        const update = notices.event(event);
        for (const notice of update.notices) options.onNotice(notice);
        for (const model of update.checkTraining) await checkTraining(model);
      } catch (error) {
        ignored(event, error);
      }
    });
  };

  const checkTraining = async (model: string) => {
    try {
      const response = await fetch(`${options.apiUrl}/models/${encodeURIComponent(model)}/training`, {
        headers: { authorization: `Bearer ${options.token}` },
        signal: AbortSignal.timeout(TRAINING_READ_TIMEOUT_MS),
      });
      // A model that is served but not trained here has no training loop: nothing to announce.
      if (response.status === 404) return;
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const state = trainingStateSchema.parse(await response.json());
      if (closed) return;
      for (const notice of notices.training(state)) options.onNotice(notice);
    } catch (error) {
      if (!closed) options.onWarning?.(`could not read the training state of ${model}: ${String(error)}`);
    }
  };

  connect();
  return {
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      socket?.close();
    },
  };
}

/** One message of the stream; anything that is not an event object is ignored (a newer peer's extra types too). */
function parseEvent(text: string): ServerEvent | null {
  try {
    const value = JSON.parse(text) as unknown;
    if (typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string')
      return value as ServerEvent;
  } catch {
    // not JSON: ignored
  }
  return null;
}
