/**
 * Keeps a view's data as fresh as the event stream makes it, with no timer while the stream is up. The peer pushes
 * status (every second), log, client and train-step events (api/connection.ts feeds them to the store); what no
 * event carries (a client's runs, a model's training state, the swarm's peers) is fetched again when `trigger`
 * changes — a value the view derives from pushed state, such as a client's counts or a model's step. `load` also
 * runs when the view opens and when the connection comes back (events sent meanwhile were missed). Only while the
 * WebSocket is down does it poll, every `fallbackMs`: a peer still reachable over HTTP keeps the view moving.
 */
import { useEffect, useRef } from 'react';
import { useAppStore } from '../store/index.ts';

export interface LiveRefreshOptions {
  /** Nothing is loaded while false (e.g. no model selected, not in a swarm). */
  enabled?: boolean;
  fallbackMs: number;
}

export function useLiveRefresh(load: () => void, trigger: string | number | null, { enabled = true, fallbackMs }: LiveRefreshOptions): void {
  const live = useAppStore((s) => s.connection.phase === 'live');
  // The latest `load` without making it a dependency: views pass a fresh closure on every render.
  const loadRef = useRef(load);
  useEffect(() => {
    loadRef.current = load;
  });

  useEffect(() => {
    if (enabled) loadRef.current();
  }, [enabled, trigger, live]);

  useEffect(() => {
    if (!enabled || live) return;
    const timer = setInterval(() => loadRef.current(), fallbackMs);
    return () => clearInterval(timer);
  }, [enabled, live, fallbackMs]);
}
