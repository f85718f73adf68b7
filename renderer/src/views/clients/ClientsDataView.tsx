/**
 * Attached agent scripts: drop one to attach it (or a new version to hot-swap it), then watch each one's
 * version, throughput, completed and aborted episodes, read its runs' output, and pause, resume or detach it.
 */
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { clientAction, loadClients, loadRuns } from '../../store/clients/loaders.ts';
import { clientsSelectors } from '../../store/clients/selectors.ts';
import type { ClientStatus } from '../../../../swarm/common/runner-api.ts';
import { apiRequest } from '../../api/page-client.ts';
import { useLiveRefresh } from '../use-live-refresh.ts';
import { formatEpisodeTime, formatReward, shortHash } from '../episodes/format.ts';
import { AttachForm } from './AttachForm.tsx';
import { DropZone } from './DropZone.tsx';
import '../episodes/data-views.css';
import './clients.css';

/** How often the list and runs are refetched while the event stream is down (it pushes `client` events). */
const FALLBACK_POLL_MS = 2_000;

export function ClientsDataView() {
  const list = useAppStore((s) => s.clients.list);
  const loaded = useAppStore((s) => s.clients.loaded);
  const error = useAppStore((s) => s.clients.error);
  const selected = useAppStore((s) => s.clients.selected);

  // The list itself is kept live by `client` events (each run's start and end, every state change).
  useLiveRefresh(() => void loadClients(appStore, apiRequest()), null, { fallbackMs: FALLBACK_POLL_MS });
  // No event carries the runs: the chosen client's runs are refetched when its status (counts, state) changes.
  const selectedChange = useAppStore((s) => clientsSelectors.runsChangeKey(clientsSelectors.selectedClient(s.clients)));
  const refreshRuns = () => {
    if (selected) void loadRuns(appStore, apiRequest(), selected);
  };
  useLiveRefresh(refreshRuns, `${selected}|${selectedChange}`, {
    enabled: selected !== null,
    fallbackMs: FALLBACK_POLL_MS,
  });

  return (
    <div className="stack clients-view">
      <Panel title="Attach a script">
        <DropZone />
        <AttachForm />
      </Panel>
      <Panel
        title="Attached scripts"
        aside={<span className="count">{list.length}</span>}
        testId="clients-panel"
      >
        {error && (
          <p className="alert" role="alert">
            {error}
          </p>
        )}
        {loaded && list.length === 0 ? (
          <p className="muted">No script attached yet. Drop one above.</p>
        ) : (
          <ClientTable list={list} selected={selected} />
        )}
      </Panel>
      {selected && <ClientDetail />}
    </div>
  );
}

function ClientTable({ list, selected }: { list: readonly ClientStatus[]; selected: string | null }) {
  const throughput = useAppStore((s) => s.clients.throughput);
  return (
    <div className="table-wrap">
      <table className="table">
        <thead>
          <tr>
            <th scope="col">Script</th>
            <th scope="col">State</th>
            <th scope="col">Version</th>
            <th scope="col">Model</th>
            <th scope="col" className="num">
              Episodes/s
            </th>
            <th scope="col" className="num">
              Ended / aborted
            </th>
            <th scope="col" className="num" title="Share of finished episodes that ended with a result (not aborted)">
              Completed
            </th>
            <th scope="col" className="num">
              Mean reward
            </th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {list.map((client) => {
            const rate = clientsSelectors.episodesPerSecond(throughput[client.name]);
            const completed = clientsSelectors.completionRate(client);
            return (
              <tr
                key={client.name}
                data-testid="client-row"
                data-client={client.name}
                aria-selected={client.name === selected}
                className="client-row"
              >
                <th scope="row">
                  <button
                    type="button"
                    className="link-button"
                    onClick={() => appStore.getState().clientSelected(client.name)}
                    aria-expanded={client.name === selected}
                  >
                    {client.name}
                  </button>
                  <div className="muted small mono">
                    {client.runtime} · {client.scriptFile.replace(/^.*[\\/]/, '')}
                  </div>
                </th>
                <td>
                  <span
                    className="state-tag"
                    data-state={client.state}
                    data-testid="client-state"
                    title={client.reason ?? undefined}
                  >
                    {client.state}
                  </span>
                  {client.reason && <div className="small muted client-reason">{client.reason}</div>}
                </td>
                <td className="mono">
                  <span data-testid="client-version">v{client.version}</span>{' '}
                  <span className="muted small">{shortHash(client.scriptHash)}</span>
                </td>
                <td className="small">{Object.values(client.models).join(', ')}</td>
                <td className="num mono">{rate === null ? '—' : rate.toFixed(2)}</td>
                <td className="num mono">
                  {formatCount(client.counts.ended)} /{' '}
                  <span className={client.counts.aborted > 0 ? 'error-text' : undefined}>
                    {formatCount(client.counts.aborted)}
                  </span>
                </td>
                <td className="num mono">{completed === null ? '—' : `${Math.round(completed * 100)}%`}</td>
                <td className="num mono">{formatReward(client.meanReward)}</td>
                <td>
                  <ClientActions client={client} />
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function ClientActions({ client }: { client: ClientStatus }) {
  const act = (action: 'pause' | 'resume' | 'detach') =>
    void clientAction(appStore, apiRequest(), client.name, action);
  const paused = client.state === 'paused' || client.state === 'broken';
  return (
    <div className="row-actions">
      {paused ? (
        <button
          type="button"
          className="button button--small"
          onClick={() => act('resume')}
          aria-label={`Resume ${client.name}`}
        >
          Resume
        </button>
      ) : (
        <button
          type="button"
          className="button button--small"
          onClick={() => act('pause')}
          aria-label={`Pause ${client.name}`}
          disabled={client.state === 'finished'}
        >
          Pause
        </button>
      )}
      <button
        type="button"
        className="button button--small button--danger"
        aria-label={`Detach ${client.name}`}
        onClick={() => {
          if (window.confirm(`Detach ${client.name}? Its in-flight episodes finish; no new ones start.`))
            act('detach');
        }}
      >
        Detach
      </button>
    </div>
  );
}

function ClientDetail() {
  const client = useAppStore((s) => clientsSelectors.selectedClient(s.clients));
  const runs = useAppStore((s) => s.clients.runs);
  const runsError = useAppStore((s) => s.clients.runsError);
  if (!client) return null;
  const failures = clientsSelectors.failures(runs);
  const perTask = Object.entries(client.perTask);
  return (
    <div className="split">
      <Panel
        title={`Runs of ${client.name}`}
        testId="client-runs"
        aside={<span className="count">{runs.length}</span>}
      >
        {runsError && <p className="alert">{runsError}</p>}
        {runs.length === 0 ? (
          <p className="muted">No run has finished yet.</p>
        ) : (
          <ol className="runs">
            {[...runs].reverse().map((run, i) => (
              <li key={`${run.startedAt}-${i}`} className="run" data-status={run.status}>
                <details>
                  <summary>
                    <span className="state-tag" data-state={run.status === 'aborted' ? 'aborted' : 'trained'}>
                      {run.status}
                    </span>{' '}
                    <span className="mono small">{formatEpisodeTime(run.startedAt)}</span> task{' '}
                    <strong>{run.taskId}</strong> · reward{' '}
                    <span className="mono">{formatReward(run.reward)}</span> ·{' '}
                    <span className="mono muted small">{shortHash(run.scriptHash)}</span>
                    {run.reason && <div className="small error-text">{run.reason}</div>}
                  </summary>
                  <RunOutput label="stdout" text={run.stdout} />
                  <RunOutput label="stderr" text={run.stderr} />
                </details>
              </li>
            ))}
          </ol>
        )}
      </Panel>
      <div className="stack">
        <Panel
          title="Failures"
          testId="client-failures"
          aside={<span className="count">{failures.length}</span>}
        >
          {failures.length === 0 ? (
            <p className="muted">No failed run among the recent ones.</p>
          ) : (
            <ul className="failures">
              {failures.slice(0, 12).map((run, i) => (
                <li key={`${run.startedAt}-${i}`}>
                  <span className="mono small">{formatEpisodeTime(run.startedAt)}</span> task {run.taskId}:{' '}
                  <span className="error-text">{run.reason ?? 'no reason given'}</span>
                  {run.exitCode !== null && <span className="muted small"> (exit {run.exitCode})</span>}
                </li>
              ))}
            </ul>
          )}
        </Panel>
        <Panel title="Per task">
          {perTask.length === 0 ? (
            <p className="muted">No task finished yet.</p>
          ) : (
            <table className="table">
              <thead>
                <tr>
                  <th scope="col">Task</th>
                  <th scope="col" className="num">
                    Episodes
                  </th>
                  <th scope="col" className="num">
                    Aborted
                  </th>
                  <th scope="col" className="num">
                    Mean reward
                  </th>
                </tr>
              </thead>
              <tbody>
                {perTask.slice(0, 50).map(([task, m]) => (
                  <tr key={task}>
                    <th scope="row">{task}</th>
                    <td className="num mono">{m.episodes}</td>
                    <td className="num mono">{m.aborted}</td>
                    <td className="num mono">{formatReward(m.meanReward)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Panel>
      </div>
    </div>
  );
}

function RunOutput({ label, text }: { label: string; text: string }) {
  if (!text) return null;
  return (
    <div className="run-output">
      <div className="muted small">{label}</div>
      <pre>{text}</pre>
    </div>
  );
}
