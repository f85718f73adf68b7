import { useEffect, useState } from 'react';
import { useAppStore } from '../store/index.ts';
import { connectionSelectors } from '../store/connection/selectors.ts';

/** How often the retry countdown repaints: twice a second keeps whole seconds accurate. */
const COUNTDOWN_REFRESH_MS = 500;

/** Connecting / Live / Disconnected — retry in Ns / Not authorised, with the last error as a tooltip. */
export function ConnectionBadge() {
  const connection = useAppStore((s) => s.connection);
  const now = useNow(connection.phase === 'disconnected');
  return (
    <div className="connection-badge" data-phase={connection.phase} data-testid="connection-state" role="status" title={connection.lastError ?? undefined}>
      <span className="connection-badge__dot" aria-hidden="true" />
      <span>{connectionSelectors.connectionLabel(connection, now)}</span>
    </div>
  );
}

/** The current time, refreshed while `ticking` (only the countdown needs it). */
function useNow(ticking: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!ticking) return;
    const timer = setInterval(() => setNow(Date.now()), COUNTDOWN_REFRESH_MS);
    return () => clearInterval(timer);
  }, [ticking]);
  return now;
}
