import { useEffect } from 'react';
import type { StatusPayload } from '../../swarm/common/api.ts';
import { ConnectionBadge } from './components/ConnectionBadge.tsx';
import { CommandLine } from './components/EmptyState.tsx';
import { Icon } from './components/Icon.tsx';
import { Sidebar } from './components/Sidebar.tsx';
import { formatClock } from './format.ts';
import { useAppStore } from './store/index.ts';
import { navigationSelectors } from './store/navigation/selectors.ts';
import type { ViewId } from '../../electron/common/views.ts';
import { ClientsDataView } from './views/clients/ClientsDataView.tsx';
import { COMMANDS } from './views/commands.ts';
import { EpisodesView } from './views/episodes/EpisodesView.tsx';
import { ModelsDataView } from './views/models/ModelsDataView.tsx';
import { PageHeader } from './views/PageHeader.tsx';
import { ResearchView } from './views/research/ResearchView.tsx';
import { RunsView } from './views/runs/RunsView.tsx';
import { usePrefetchRuns } from './views/runs/use-prefetch-runs.ts';
import { SwarmView } from './views/SwarmView.tsx';
import { TimelineMergeView } from './views/timeline/TimelineMergeView.tsx';

/** The shell: sidebar, top bar with the connection state, and the current view. */
export function App({ hasToken, onRetryNow }: { hasToken: boolean; onRetryNow: () => void }) {
  const phase = useAppStore((s) => s.connection.phase);
  const status = useAppStore((s) => s.swarm.status);
  const view = useAppStore((s) => s.navigation.view);
  usePrefetchRuns();

  if (!hasToken) return <NoTokenScreen />;
  if (phase === 'unauthorised') return <NotAuthorisedScreen />;

  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <Sidebar version={status?.version ?? null} />
      <div className="main-column">
        <header className="topbar">
          <div className="topbar__peer">
            {status ? (
              <>
                <span className="muted">Peer</span> <code className="mono">{status.nodeId}</code>
              </>
            ) : (
              <span className="muted">Waiting for the peer…</span>
            )}
          </div>
          <ConnectionBadge />
        </header>
        {status && phase !== 'live' && <StaleBanner onRetryNow={onRetryNow} />}
        <main id="main" className="content" data-view={view}>
          <ViewTitle view={view} />
          {status ? <CurrentView view={view} status={status} /> : <WaitingForPeer />}
        </main>
      </div>
    </div>
  );
}

/** The page header; also names the browser tab / window after the view. */
function ViewTitle({ view }: { view: ViewId }) {
  const label = navigationSelectors.viewInfo(view).label;
  useEffect(() => {
    document.title = `${label} — AgentJet`;
  }, [label]);
  return <PageHeader />;
}

function CurrentView({ view, status }: { view: ViewId; status: StatusPayload }) {
  switch (view) {
    case 'swarm':
      return <SwarmView status={status} />;
    case 'models':
      return <ModelsDataView />;
    case 'runs':
      return <RunsView />;
    case 'research':
      return <ResearchView />;
    case 'clients':
      return <ClientsDataView />;
    case 'episodes':
      return <EpisodesView />;
    case 'timeline':
      return <TimelineMergeView />;
  }
}

/** While not live, the numbers on screen are the last ones received: say so, and from when. */
function StaleBanner({ onRetryNow }: { onRetryNow: () => void }) {
  const receivedAt = useAppStore((s) => s.swarm.receivedAt);
  const phase = useAppStore((s) => s.connection.phase);
  const lastError = useAppStore((s) => s.connection.lastError);
  const when = receivedAt ? formatClock(new Date(receivedAt).toISOString()) : 'earlier';
  return (
    <div className="stale-banner" role="status" data-testid="stale-banner">
      <span>
        <strong>Not live.</strong> Showing the peer’s last status, from {when}.{lastError && <span className="muted"> {lastError}.</span>}
      </span>
      {phase === 'disconnected' && (
        <button type="button" className="button" onClick={onRetryNow}>
          Retry now
        </button>
      )}
    </div>
  );
}

function WaitingForPeer() {
  const lastError = useAppStore((s) => s.connection.lastError);
  return (
    <div className="panel waiting" aria-busy="true">
      <div className="spinner" aria-hidden="true" />
      <div>
        <p>Waiting for the first status from the peer…</p>
        {lastError && <p className="muted small">Last attempt: {lastError}</p>}
      </div>
    </div>
  );
}

function NoTokenScreen() {
  return (
    <div className="gate" data-testid="no-token">
      <div className="gate__card">
        <div className="gate__icon">
          <Icon name="lock" size={28} />
        </div>
        <h1>Open AgentJet from the link your peer printed</h1>
        <p>
          This page needs the peer’s access token. Start a peer and open the <strong>UI</strong> address it prints (it ends in{' '}
          <code>#token=…</code>):
        </p>
        <CommandLine command={COMMANDS.startPeer} />
      </div>
    </div>
  );
}

function NotAuthorisedScreen() {
  const reason = useAppStore((s) => s.connection.lastError);
  return (
    <div className="gate" data-testid="not-authorised" role="alert">
      <div className="gate__card">
        <div className="gate__icon gate__icon--danger">
          <Icon name="lock" size={28} />
        </div>
        <h1>Not authorised</h1>
        <p>The peer refused this page’s access token. It may belong to another peer, or the peer was restarted with a new token.</p>
        {reason && <p className="muted small">The peer said: {reason}</p>}
        <p>Open the UI address the peer printed at start-up (it ends in <code>#token=…</code>).</p>
        <CommandLine command={COMMANDS.startPeer} />
      </div>
    </div>
  );
}
