/**
 * Keeps the UI connected to its peer. One attempt: GET /api/status (a 401 here means a bad token — stop and
 * say so; anything else is retried), then open the event WebSocket; `status`, `log`, `client`, `train-step`,
 * `run` and `study` events feed the store (what no event carries, the views refetch when pushed state moves: views/use-live-refresh.ts).
 * When the socket closes, wait (exponential backoff, shown as a countdown) and try again.
 */
import type { ServerEvent } from '../../../swarm/common/api.ts';
import type { AppStore } from '../store/index.ts';
import type { ControlApiClient } from './client.ts';
import { ControlApiError } from './errors.ts';
import { reconnectDelayMs } from './backoff.ts';

type StoreActions = Pick<
  AppStore,
  'connectionStarted' | 'connectionLive' | 'connectionLost' | 'connectionUnauthorised' | 'statusReceived' | 'logReceived'
> &
  // The data views' live updates (clients, training steps, runs, studies); optional so a caller may leave them out.
  Partial<Pick<AppStore, 'clientUpdated' | 'clientRemoved' | 'trainStepPushed' | 'runUpdated' | 'studyUpdated'>>;

export interface ConnectionOptions {
  client: ControlApiClient;
  actions: StoreActions;
  /** Failed attempts so far, read when scheduling a retry (the store counts them). */
  failedAttempts: () => number;
  WebSocketImpl?: typeof WebSocket;
  now?: () => number;
  random?: () => number;
}

export interface ConnectionControl {
  /** Skip the rest of the backoff wait and try now (the "Retry now" button). No-op unless a retry is pending. */
  retryNow(): void;
  /** Stop for good: close the socket, cancel the retry. */
  stop(): void;
}

/** Start connecting to the peer and keep the store fed. */
export function startConnection({
  client,
  actions,
  failedAttempts,
  WebSocketImpl = WebSocket,
  now = Date.now,
  random = Math.random,
}: ConnectionOptions): ConnectionControl {
  let stopped = false;
  let socket: WebSocket | null = null;
  let retryTimer: ReturnType<typeof setTimeout> | null = null;
  const abort = new AbortController();

  function scheduleRetry(reason: string): void {
    if (stopped) return;
    const delay = reconnectDelayMs(failedAttempts(), random());
    actions.connectionLost(reason, now() + delay);
    retryTimer = setTimeout(() => {
      retryTimer = null;
      void attempt();
    }, delay);
  }

  async function attempt(): Promise<void> {
    if (stopped) return;
    actions.connectionStarted();
    try {
      actions.statusReceived(await client.getStatus(abort.signal), now());
    } catch (error) {
      if (stopped) return;
      if (error instanceof ControlApiError && error.isUnauthorised) {
        actions.connectionUnauthorised(error.message);
        return;
      }
      scheduleRetry(error instanceof Error ? error.message : String(error));
      return;
    }
    openSocket();
  }

  function openSocket(): void {
    const ws = new WebSocketImpl(client.eventsUrl());
    socket = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      actions.connectionLive();
    };
    ws.onmessage = (message: MessageEvent) => handleEvent(message.data);
    ws.onclose = (event: CloseEvent) => {
      if (socket !== ws) return;
      socket = null;
      scheduleRetry(opened ? `Connection closed (code ${event.code})` : 'The event stream refused the connection');
    };
  }

  function handleEvent(raw: unknown): void {
    if (typeof raw !== 'string') return;
    let event: ServerEvent;
    try {
      event = JSON.parse(raw) as ServerEvent;
    } catch {
      return; // a malformed frame is dropped; the next status event repairs the view
    }
    if (event.type === 'status') actions.statusReceived(event.data, now());
    else if (event.type === 'log') actions.logReceived(event.data);
    else if (event.type === 'client') actions.clientUpdated?.(event.data, now());
    else if (event.type === 'client-detached') actions.clientRemoved?.(event.data.name);
    else if (event.type === 'train-step') actions.trainStepPushed?.(event.data);
    else if (event.type === 'run') actions.runUpdated?.(event.data);
    else if (event.type === 'study') actions.studyUpdated?.(event.data);
    // Other event types (added by newer peers) are ignored.
  }

  void attempt();
  return {
    retryNow() {
      if (stopped || retryTimer === null) return;
      clearTimeout(retryTimer);
      retryTimer = null;
      void attempt();
    },
    stop() {
      stopped = true;
      abort.abort();
      if (retryTimer) clearTimeout(retryTimer);
      const ws = socket;
      socket = null;
      ws?.close();
    },
  };
}
