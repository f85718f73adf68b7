import type { ConnectionState } from './slice.ts';

/** Whole seconds until the next retry (never negative); null when no retry is scheduled. */
function retryInSeconds(connection: ConnectionState, nowMs: number): number | null {
  if (connection.phase !== 'disconnected' || connection.retryAt === null) return null;
  return Math.max(0, Math.ceil((connection.retryAt - nowMs) / 1000));
}

/** The short label of the connection badge. */
function connectionLabel(connection: ConnectionState, nowMs: number): string {
  switch (connection.phase) {
    case 'connecting':
      return 'Connecting…';
    case 'live':
      return 'Live';
    case 'unauthorised':
      return 'Not authorised';
    case 'disconnected': {
      const seconds = retryInSeconds(connection, nowMs);
      return seconds === null || seconds === 0 ? 'Disconnected — retrying…' : `Disconnected — retry in ${seconds}s`;
    }
  }
}

export const connectionSelectors = { retryInSeconds, connectionLabel };
