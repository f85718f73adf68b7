import { useMemo } from 'react';
import type { ModelStatus, StatusPayload, SwarmPeer } from '../../../swarm/common/api.ts';
import { CopyableValue } from '../components/CopyButton.tsx';
import { CommandLine, EmptyState } from '../components/EmptyState.tsx';
import { Fact, Facts, Panel } from '../components/Panel.tsx';
import { EngineStateBadge } from '../components/StateBadge.tsx';
import { formatClock, formatCount, formatDuration } from '../format.ts';
import { appStore, useAppStore } from '../store/index.ts';
import { loadPeers } from '../store/swarm/loaders.ts';
import { apiRequest } from '../api/page-client.ts';
import { useLiveRefresh } from './use-live-refresh.ts';
import { activitySelectors } from '../store/activity/selectors.ts';
import { swarmSelectors } from '../store/swarm/selectors.ts';
import { COMMANDS } from './commands.ts';
import { SwarmNetworkPanel } from './swarm/SwarmNetworkPanel.tsx';
import './episodes/data-views.css';
import './swarm/swarm.css';

/** This peer at a glance: identity, endpoints, hosted models, storage, network, recent activity. */
export function SwarmView({ status }: { status: StatusPayload }) {
  return (
    <div className="swarm-view">
      <div className="stats" role="list" aria-label="Summary">
        <Stat label="Uptime" value={formatDuration(status.uptimeS)} testId="stat-uptime" />
        <Stat label="Hosted models" value={formatCount(status.models.length)} />
        <Stat label="Episodes stored" value={formatCount(status.store.episodes)} />
        <Stat label="Swarm peers" value={status.p2p.enabled ? formatCount(status.p2p.peers) : 'Off'} />
      </div>

      <div className="grid grid--peer">
        <PeerPanel status={status} />
        <div className="stack">
          <EndpointsPanel urls={status.urls} />
          <SwarmNetworkPanel status={status} />
        </div>
      </div>

      <ModelsPanel models={status.models} />

      <PeersPanel enabled={status.p2p.enabled} />

      <div className="grid grid--two">
        <Panel title="Store" testId="store-panel">
          <Facts>
            <Fact label="Database">
              <CopyableValue value={status.store.path} label="database path" />
            </Fact>
            <Fact label="Schema version">{status.store.schemaVersion}</Fact>
            <Fact label="Episodes">{formatCount(status.store.episodes)}</Fact>
          </Facts>
        </Panel>
        <ActivityPanel />
      </div>
    </div>
  );
}

function Stat({ label, value, testId }: { label: string; value: string; testId?: string }) {
  return (
    <div className="stat" role="listitem">
      <div className="stat__value" data-testid={testId}>
        {value}
      </div>
      <div className="stat__label">{label}</div>
    </div>
  );
}

function PeerPanel({ status }: { status: StatusPayload }) {
  return (
    <Panel title="This peer" aside={<span className="mono muted">v{status.version}</span>} testId="peer-panel">
      <Facts>
        <Fact label="Node ID">
          <CopyableValue value={status.nodeId} label="node ID" testId="peer-node-id" />
        </Fact>
        <Fact label="Version" testId="peer-version">
          {status.version}
        </Fact>
        <Fact label="Roles">
          {status.roles.length ? (
            <span className="chips">
              {status.roles.map((role) => (
                <span key={role} className="chip">
                  {role === 'server' ? 'Swarm server' : 'Swarm client'}
                </span>
              ))}
            </span>
          ) : (
            <span className="muted">None yet — hosting a model makes this peer a server</span>
          )}
        </Fact>
        <Fact label="Uptime" testId="peer-uptime">
          <span className="tabular">{formatDuration(status.uptimeS)}</span>
          <span className="muted"> since {formatClock(status.startedAt)}</span>
        </Fact>
        <Fact label="Data directory">
          <CopyableValue value={status.dataDir} label="data directory" />
        </Fact>
        <Fact label="Compute backend">
          {status.backend ? (
            <span>
              <strong>{status.backend.name}</strong> <span className="muted">— {status.backend.reason}</span>
            </span>
          ) : (
            <span className="muted">Chosen when the first model starts</span>
          )}
        </Fact>
      </Facts>
    </Panel>
  );
}

function EndpointsPanel({ urls }: { urls: StatusPayload['urls'] }) {
  return (
    <Panel title="Endpoints" testId="endpoints-panel">
      <Facts>
        <Fact label="Control API">
          <CopyableValue value={urls.api} label="control API URL" />
        </Fact>
        <Fact label="OpenAI gateway">
          <CopyableValue value={urls.gateway} label="gateway URL" />
        </Fact>
      </Facts>
      <p className="hint">Point any OpenAI-compatible client at the gateway URL; each episode gets its own API key.</p>
    </Panel>
  );
}

function ModelsPanel({ models }: { models: readonly ModelStatus[] }) {
  return (
    <Panel title="Hosted models" aside={<span className="count">{models.length}</span>} testId="models-panel">
      {models.length === 0 ? (
        <EmptyState icon="models" title="No models hosted on this peer">
          <p>A hosted model is served through the gateway and trained on the episodes its agents produce. Start the built-in tiny model to try it:</p>
          <CommandLine command={COMMANDS.serveModel} />
        </EmptyState>
      ) : (
        <div className="table-wrap">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">State</th>
                <th scope="col" className="num">Policy</th>
                <th scope="col" className="num">Step</th>
                <th scope="col">Episode pool</th>
              </tr>
            </thead>
            <tbody>
              {models.map((model) => (
                <tr key={model.name}>
                  <th scope="row">
                    <div className="model-name">{model.name}</div>
                    <div className="muted small mono">{model.source}</div>
                  </th>
                  <td>
                    <EngineStateBadge state={model.engineState} error={model.error} />
                  </td>
                  <td className="num mono">v{model.policyVersion}</td>
                  <td className="num mono">{formatCount(model.step)}</td>
                  <td>
                    <PoolMeter model={model} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Panel>
  );
}

/**
 * Presence announcements arrive every few seconds and no event carries them, so the list is refetched at that pace
 * as the peer's status events arrive (every second), at once when the swarm or its peer count changes, and by a
 * fallback poll at the same pace while the event stream is down.
 */
const PEERS_REFRESH_MS = 3_000;

/** The swarm's peers (this one first): roles, models with their policy versions, load, scripts, connection. */
function PeersPanel({ enabled }: { enabled: boolean }) {
  const peers = useAppStore((s) => s.swarm.peers);
  const error = useAppStore((s) => s.swarm.peersError);
  const change = useAppStore((s) => swarmSelectors.peersChangeKey(s.swarm, PEERS_REFRESH_MS));
  useLiveRefresh(() => void loadPeers(appStore, apiRequest()), change, { enabled, fallbackMs: PEERS_REFRESH_MS });

  return (
    <Panel title="Swarm peers" aside={<span className="count">{enabled && peers ? peers.peers.length : 0}</span>} testId="peers-panel">
      {!enabled ? (
        <EmptyState icon="swarm" title="This peer is not in a swarm">
          <p>Peers in one private swarm share models and episodes over libp2p. Create a swarm on one machine (Swarm network, above) and join it from the others with its token. From a terminal, before the peer starts:</p>
          <CommandLine command={COMMANDS.createSwarm} />
          <CommandLine command={COMMANDS.joinSwarm} />
        </EmptyState>
      ) : (
        <>
          {error && (
            <p className="alert" role="alert">
              {error}
            </p>
          )}
          {peers && (
            <div className="table-wrap">
              <table className="table" aria-label={`Peers of swarm ${peers.swarm}`}>
                <thead>
                  <tr>
                    <th scope="col">Peer</th>
                    <th scope="col">Connection</th>
                    <th scope="col">Roles</th>
                    <th scope="col">Models</th>
                    <th scope="col" className="num">Load</th>
                    <th scope="col">Scripts</th>
                  </tr>
                </thead>
                <tbody>
                  {peers.peers.map((peer) => (
                    <PeerRow key={peer.peerId} peer={peer} />
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </>
      )}
    </Panel>
  );
}

function PeerRow({ peer }: { peer: SwarmPeer }) {
  return (
    <tr data-testid="peer-row" data-self={peer.self}>
      <th scope="row">
        <code className="mono small" title={peer.peerId}>
          {peer.peerId.slice(-12)}
        </code>
        {peer.self && <span className="chip">this peer</span>}
      </th>
      <td>
        {peer.self ? (
          <span className="muted">—</span>
        ) : (
          <span className="pill" data-state={peer.connected ? 'connected' : 'alone'}>
            {peer.connected ? 'Connected' : 'Seen'}
            {peer.lastSeen && <span className="muted"> {formatClock(peer.lastSeen)}</span>}
          </span>
        )}
      </td>
      <td>{peer.roles.join(', ') || <span className="muted">—</span>}</td>
      <td className="mono small">{peer.models.map((m) => `${m.name}@v${m.policyVersion}`).join(', ') || <span className="muted">—</span>}</td>
      <td className="num mono">
        {peer.pool.load}/{peer.pool.capacity}
      </td>
      <td>{peer.clientScripts.join(', ') || <span className="muted">—</span>}</td>
    </tr>
  );
}

function PoolMeter({ model }: { model: ModelStatus }) {
  const usage = swarmSelectors.poolUsage(model);
  return (
    <div className="meter" title={`${model.pool.active} active of ${model.pool.limit}`}>
      <div className="meter__bar" role="meter" aria-valuemin={0} aria-valuemax={model.pool.limit} aria-valuenow={model.pool.active} aria-label={`${model.name} episode pool`}>
        <div className="meter__fill" style={{ width: `${usage * 100}%` }} />
      </div>
      <span className="mono small">
        {model.pool.active}/{model.pool.limit}
      </span>
    </div>
  );
}

/** How many log lines the Swarm view shows; the full stream stays in the store (bounded) for later views. */
const ACTIVITY_LINES = 8;

function ActivityPanel() {
  const activity = useAppStore((s) => s.activity);
  const recent = useMemo(() => activitySelectors.recentLogs(activity, ACTIVITY_LINES), [activity]);
  return (
    <Panel title="Activity" testId="activity-panel">
      {recent.length === 0 ? (
        <p className="muted">The peer’s log lines appear here as they happen.</p>
      ) : (
        <ol className="log">
          {recent.map((entry) => (
            <li key={entry.seq} className="log__line" data-level={entry.level}>
              <time className="log__time mono">{formatClock(entry.time)}</time>
              <span className="log__level">{entry.level}</span>
              <span className="log__msg">{entry.msg}</span>
            </li>
          ))}
        </ol>
      )}
    </Panel>
  );
}
