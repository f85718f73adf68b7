/** The clock, for durations that grow while a run is live: ticks every `everyMs` while `enabled`, else stands still. */
import { useEffect, useState } from 'react';

export function useNow(enabled: boolean, everyMs = 1_000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!enabled) return;
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [enabled, everyMs]);
  return now;
}
