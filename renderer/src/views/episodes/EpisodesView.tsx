/** Every episode the peer stored: filters, a virtualised list that pages through the API, and the chosen one's conversation. */
import { useEffect, useState } from 'react';
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { EPISODE_KINDS, EPISODE_STATES } from '../../store/episodes/types.ts';
import { EpisodeCompare } from './EpisodeCompare.tsx';
import { EpisodeDetail } from './EpisodeDetail.tsx';
import { EpisodesList } from './EpisodesList.tsx';
import './data-views.css';
import './episodes.css';

/** What the Version filter sends: a whole number (the API refuses anything else with 400). */
const POLICY_VERSION = /^\d{1,15}$/;

/** New episodes refresh the list at most this often: a busy swarm ends many a second. */
const REFRESH_MIN_MS = 2_000;

export function EpisodesView() {
  const total = useAppStore((s) => s.episodes.total);
  const error = useAppStore((s) => s.episodes.error);
  const comparing = useAppStore((s) => s.episodes.compare !== null);
  useRefreshOnNewEpisodes();
  return (
    <div className="split episodes-view">
      <Panel
        title="Episodes"
        testId="episodes-panel"
        aside={
          <span className="count" data-testid="episode-total">
            {total === null ? '…' : formatCount(total)}
          </span>
        }
      >
        <EpisodeFilters />
        {error && (
          <p className="alert" role="alert">
            {error}
          </p>
        )}
        {total === 0 && (
          <p className="muted episodes-empty">
            No episode matches. Episodes appear as soon as a client runs tasks against a hosted model.
          </p>
        )}
        {/* Mounted even when empty: it keeps asking for page 0, which brings the first episodes when they arrive. */}
        <EpisodesList />
      </Panel>
      {comparing ? <EpisodeCompare /> : <EpisodeDetail />}
    </div>
  );
}

/** The peer's status carries the stored episode count: when it grows, refetch the rows on screen. */
function useRefreshOnNewEpisodes() {
  useEffect(() => {
    let lastRefresh = 0;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const refresh = () => {
      timer = null;
      lastRefresh = Date.now();
      appStore.getState().episodesRefreshed();
    };
    const unsubscribe = appStore.subscribe((state, previous) => {
      const now = state.swarm.status?.store.episodes;
      const before = previous.swarm.status?.store.episodes;
      if (now === undefined || now === before || timer) return;
      timer = setTimeout(refresh, Math.max(0, lastRefresh + REFRESH_MIN_MS - Date.now()));
    });
    return () => {
      unsubscribe();
      if (timer) clearTimeout(timer);
    };
  }, []);
}

function EpisodeFilters() {
  const filter = useAppStore((s) => s.episodes.filter);
  const models = useAppStore((s) => s.swarm.status?.models);
  const change = appStore.getState().episodeFilterChanged;
  const [query, setQuery] = useState(filter.query);
  const [taskId, setTaskId] = useState(filter.taskId);
  const [client, setClient] = useState(filter.client);
  const [policyVersion, setPolicyVersion] = useState(filter.policyVersion);
  const comparing = useAppStore((s) => s.episodes.compare !== null);
  // Only digits reach the API; anything else typed is shown, marked invalid, and not sent.
  const versionValid = policyVersion === '' || POLICY_VERSION.test(policyVersion);

  // Typing settles before a request goes out.
  useEffect(() => {
    const timer = setTimeout(() => {
      const current = appStore.getState().episodes.filter;
      const typed = { query, taskId, client: client.trim(), policyVersion: versionValid ? policyVersion : current.policyVersion };
      if (
        current.query !== typed.query ||
        current.taskId !== typed.taskId ||
        current.client !== typed.client ||
        current.policyVersion !== typed.policyVersion
      )
        change(typed);
    }, 250);
    return () => clearTimeout(timer);
  }, [query, taskId, client, policyVersion, versionValid, change]);

  return (
    <div className="toolbar episode-filters" role="search">
      <label className="field">
        <span className="field__label">Search</span>
        <input
          className="input input--wide"
          type="search"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
          placeholder="words said, id, task, model, script…"
          data-testid="episode-search"
        />
      </label>
      <label className="field">
        <span className="field__label">Model</span>
        <select className="select" value={filter.model} onChange={(e) => change({ model: e.target.value })}>
          <option value="">Any</option>
          {models?.map((m) => (
            <option key={m.name} value={m.name}>
              {m.name}
            </option>
          ))}
        </select>
      </label>
      <label className="field">
        <span className="field__label">Task</span>
        <input
          className="input"
          value={taskId}
          onChange={(e) => setTaskId(e.target.value)}
          placeholder="exact task id"
          style={{ width: 140 }}
        />
      </label>
      <label className="field">
        <span className="field__label">Client</span>
        <input
          className="input"
          value={client}
          onChange={(e) => setClient(e.target.value)}
          placeholder="exact client"
          style={{ width: 120 }}
          data-testid="episodes-filter-client"
        />
      </label>
      <label className="field">
        <span className="field__label">Version</span>
        <input
          className="input input--narrow"
          inputMode="numeric"
          value={policyVersion}
          onChange={(e) => setPolicyVersion(e.target.value.trim())}
          placeholder="any"
          aria-invalid={!versionValid || undefined}
          title={versionValid ? 'policy version the episode began with' : 'a policy version is a whole number'}
          data-testid="episodes-filter-version"
        />
      </label>
      <label className="field">
        <span className="field__label">Kind</span>
        <select
          className="select"
          value={filter.kind}
          onChange={(e) => change({ kind: e.target.value as typeof filter.kind })}
          data-testid="episodes-filter-kind"
        >
          <option value="">Any</option>
          {EPISODE_KINDS.map((k) => (
            <option key={k}>{k}</option>
          ))}
        </select>
      </label>
      <label className="field">
        <span className="field__label">State</span>
        <select
          className="select"
          value={filter.state}
          onChange={(e) => change({ state: e.target.value as typeof filter.state })}
          data-testid="episodes-filter-state"
        >
          <option value="">Any</option>
          {EPISODE_STATES.map((k) => (
            <option key={k}>{k}</option>
          ))}
        </select>
      </label>
      <button
        type="button"
        className="button"
        aria-pressed={comparing}
        onClick={() => {
          if (comparing) appStore.getState().episodeCompareClosed();
          else {
            // Opens the panel; the comparison starts when its form is sent.
            const { detail } = appStore.getState().episodes;
            const version = detail?.episode.policyVersion ?? 0;
            appStore.getState().episodeCompareOpened(detail?.episode.taskId ?? '', [Math.max(0, version - 1), version]);
          }
        }}
        data-testid="episodes-compare"
      >
        Compare versions
      </button>
    </div>
  );
}
