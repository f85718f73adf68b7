/** The run page's tables: events, checkpoints (with archive download), scripts and their versions, tasks. */
import { useState } from 'react';
import type { RunCheckpoint, RunDetail, RunEvent, RunScript, RunTaskRow } from '../../../../swarm/common/runs-api.ts';
import { describeError } from '../../api/errors.ts';
import { pageClient } from '../../api/page-client.ts';
import { formatCount } from '../../format.ts';
import { formatEpisodeTime, formatReward, shortHash } from '../episodes/format.ts';
import { formatPercent } from './format.ts';

/** Events past this many are left out of the list (the newest kept): a long run checkpoints thousands of times. */
export const MAX_EVENTS_LISTED = 200;

export function EventsTable({ events }: { events: readonly RunEvent[] }) {
  if (events.length === 0) return <p className="muted">No event yet.</p>;
  const shown = events.slice(-MAX_EVENTS_LISTED).reverse();
  return (
    <div className="table-wrap run-table-scroll">
      <table className="table" data-testid="run-events">
        <thead>
          <tr>
            <th scope="col">Step</th>
            <th scope="col">Event</th>
            <th scope="col">What</th>
            <th scope="col">Time</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((event, i) => (
            <tr key={`${event.time}-${i}`} data-kind={event.kind}>
              <td className="mono num">{event.step}</td>
              <td>
                <span className="state-tag" data-event={event.kind}>
                  {event.kind}
                </span>
              </td>
              <td>{event.label}</td>
              <td className="mono small">{formatEpisodeTime(event.time)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {events.length > shown.length && <p className="muted small table-note">The newest {MAX_EVENTS_LISTED} of {formatCount(events.length)} events.</p>}
    </div>
  );
}

export function CheckpointsTable({ run }: { run: Pick<RunDetail, 'model' | 'name' | 'checkpoints' | 'config'> }) {
  const [exporting, setExporting] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  if (run.checkpoints.length === 0)
    return <p className="muted">{run.config.checkpointEvery === 0 ? 'Checkpoints are off (checkpointEvery 0).' : 'No checkpoint yet.'}</p>;
  const download = async (checkpoint: RunCheckpoint) => {
    setExporting(checkpoint.modelStep);
    setError(null);
    try {
      const model = encodeURIComponent(run.model);
      await pageClient().download(`/models/${model}/checkpoints/${checkpoint.modelStep}/archive`, `${run.name}-step-${checkpoint.step}.tar`);
    } catch (e) {
      setError(describeError(e));
    } finally {
      setExporting(null);
    }
  };
  return (
    <div className="table-wrap run-table-scroll">
      {error && (
        <p className="alert" role="alert">
          Export failed: {error}
        </p>
      )}
      <table className="table" data-testid="run-checkpoints">
        <thead>
          <tr>
            <th scope="col">Run step</th>
            <th scope="col">Model step</th>
            <th scope="col">Policy</th>
            <th scope="col">Time</th>
            <th scope="col">Folder</th>
            <th scope="col">Archive</th>
          </tr>
        </thead>
        <tbody>
          {[...run.checkpoints].reverse().map((c) => (
            <tr key={c.modelStep}>
              <td className="mono num">{c.step}</td>
              <td className="mono num">{c.modelStep}</td>
              <td className="mono">v{c.policyVersion}</td>
              <td className="mono small">{formatEpisodeTime(c.time)}</td>
              <td className="mono small">{c.dir}</td>
              <td>
                <button
                  type="button"
                  className="button"
                  disabled={exporting !== null}
                  aria-label={`Download the checkpoint of run step ${c.step} as a tar archive`}
                  onClick={() => void download(c)}
                >
                  {exporting === c.modelStep ? 'Downloading…' : 'Download'}
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function ScriptsTable({ scripts }: { scripts: readonly RunScript[] }) {
  if (scripts.length === 0) return <p className="muted">No episode yet.</p>;
  return (
    <div className="table-wrap">
      <table className="table" data-testid="run-scripts">
        <thead>
          <tr>
            <th scope="col">Script</th>
            <th scope="col">Version</th>
            <th scope="col">Hash</th>
            <th scope="col" className="num">
              Episodes
            </th>
            <th scope="col">First</th>
            <th scope="col">Last</th>
          </tr>
        </thead>
        <tbody>
          {scripts.map((s) => (
            <tr key={`${s.client}-${s.version}-${s.hash}`}>
              <th scope="row">{s.client}</th>
              <td className="mono">{s.version === null ? 'outside the runner' : `v${s.version}`}</td>
              <td className="mono" title={s.hash ?? undefined}>
                {shortHash(s.hash)}
              </td>
              <td className="mono num">{formatCount(s.episodes)}</td>
              <td className="mono small">{formatEpisodeTime(s.firstAt)}</td>
              <td className="mono small">{formatEpisodeTime(s.lastAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Per task, the train split first, then the held-out (eval) one. */
export function TasksTable({ tasks }: { tasks: readonly RunTaskRow[] | null }) {
  if (tasks === null) return <p className="muted">Loading tasks…</p>;
  if (tasks.length === 0) return <p className="muted">No episode yet.</p>;
  const splits = (['train', 'eval'] as const).map((kind) => ({ kind, rows: tasks.filter((t) => t.kind === kind) })).filter((s) => s.rows.length > 0);
  return (
    <div className="table-wrap run-table-scroll">
      <table className="table" data-testid="run-tasks">
        <thead>
          <tr>
            <th scope="col">Task</th>
            <th scope="col" className="num">
              Episodes
            </th>
            <th scope="col" className="num">
              Mean reward
            </th>
            <th scope="col" className="num">
              Success
            </th>
            <th scope="col" className="num">
              Latest reward
            </th>
          </tr>
        </thead>
        {splits.map((split) => (
          <tbody key={split.kind} data-split={split.kind}>
            <tr className="table-group">
              <th scope="colgroup" colSpan={5}>
                {split.kind === 'train' ? 'Train tasks' : 'Held-out (eval) tasks'} · {split.rows.length}
              </th>
            </tr>
            {split.rows.map((t) => (
              <tr key={`${t.kind}-${t.taskId}`} data-testid="run-task-row" data-kind={t.kind}>
                <th scope="row" className="mono">
                  {t.taskId}
                </th>
                <td className="mono num">{formatCount(t.episodes)}</td>
                <td className="mono num">{formatReward(t.meanReward)}</td>
                <td className="mono num">{formatPercent(t.successRate)}</td>
                <td className="mono num">{formatReward(t.lastReward)}</td>
              </tr>
            ))}
          </tbody>
        ))}
      </table>
    </div>
  );
}
