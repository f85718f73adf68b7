/** The study page's tables: its runs (live phase and step), its events, and the analysis's arms. */
import type { ArmAnalysis, StudyEvent, StudyRunRecord } from '../../../../swarm/common/research-api.ts';
import { formatCount } from '../../format.ts';
import { formatEpisodeTime } from '../episodes/format.ts';
import { armLabel } from './bands.ts';
import { formatInterval, formatMetric, formatParams } from './format.ts';
import { StudyStatusBadge } from './StudyBadges.tsx';

/** Events past this many are left out of the list (the newest kept). */
export const MAX_STUDY_EVENTS_LISTED = 200;

export function StudyRunsTable({ runs, stages }: { runs: readonly StudyRunRecord[]; stages: number }) {
  if (runs.length === 0) return <p className="muted">No run planned yet.</p>;
  return (
    <div className="table-wrap run-table-scroll">
      <table className="table" data-testid="study-runs-table">
        <thead>
          <tr>
            {stages > 1 && (
              <th scope="col" className="num">
                Stage
              </th>
            )}
            <th scope="col">Arm</th>
            <th scope="col" className="num">
              Seed
            </th>
            <th scope="col" className="num">
              Steps
            </th>
            <th scope="col">Status</th>
            <th scope="col" className="num">
              Attempts
            </th>
            <th scope="col">Phase</th>
            <th scope="col" className="num">
              Metric
            </th>
            <th scope="col">Reason</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((run) => (
            <tr key={run.id} data-testid="study-run-row" data-study-run-id={run.id} data-status={run.status}>
              {stages > 1 && <td className="mono num">{run.stage + 1}</td>}
              <td title={run.dir}>
                {run.arm}
                {Object.keys(run.params).length > 0 && (
                  <span className="muted small"> {formatParams(run.params)}</span>
                )}
                {run.continues && <span className="muted small"> (continues {run.continues})</span>}
              </td>
              <td className="mono num">{run.seed}</td>
              <td className="mono num">{formatCount(run.steps)}</td>
              <td>
                <StudyStatusBadge status={run.status} testId="study-run-status" />
              </td>
              <td className="mono num">{run.attempts}</td>
              <td className="mono small" data-testid="study-run-phase">
                {run.status === 'running' || run.phase
                  ? `${run.phase ?? 'starting'} · step ${run.runStep}/${run.steps}`
                  : '—'}
              </td>
              <td className="mono num">{formatMetric(run.metric)}</td>
              <td className="small">{run.reason ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function StudyEventsTable({ events }: { events: readonly StudyEvent[] }) {
  if (events.length === 0) return <p className="muted">No event yet.</p>;
  const shown = events.slice(-MAX_STUDY_EVENTS_LISTED).reverse();
  return (
    <div className="table-wrap run-table-scroll">
      <table className="table" data-testid="study-events">
        <thead>
          <tr>
            <th scope="col">Time</th>
            <th scope="col">Event</th>
            <th scope="col">What</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((event, i) => (
            <tr key={`${event.time}-${i}`} data-kind={event.kind}>
              <td className="mono small">{formatEpisodeTime(event.time)}</td>
              <td>
                <span className="state-tag" data-event={event.kind}>
                  {event.kind}
                </span>
              </td>
              <td>{event.message}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {events.length > shown.length && (
        <p className="muted small table-note">
          The newest {MAX_STUDY_EVENTS_LISTED} of {formatCount(events.length)} events.
        </p>
      )}
    </div>
  );
}

export function ArmsTable({ arms, best }: { arms: readonly ArmAnalysis[]; best: string | null }) {
  if (arms.length === 0) return <p className="muted">No arm has a finished run yet.</p>;
  const manyStages = new Set(arms.map((a) => a.stage)).size > 1;
  return (
    <div className="table-wrap">
      <table className="table" data-testid="study-arms">
        <thead>
          <tr>
            <th scope="col">Arm</th>
            <th scope="col" className="num">
              Steps
            </th>
            <th scope="col" className="num">
              Mean
            </th>
            <th scope="col" className="num">
              95% CI
            </th>
            <th scope="col" className="num">
              n
            </th>
            <th scope="col">Per seed</th>
            <th scope="col" className="num">
              Failed
            </th>
          </tr>
        </thead>
        <tbody>
          {arms.map((arm) => (
            <tr key={`${arm.stage}:${arm.arm}`} data-testid="study-arm-row" data-arm={arm.arm}>
              <td>
                {armLabel(arm, manyStages)}
                {best === arm.arm && (
                  <span className="state-tag" data-state="trained">
                    best
                  </span>
                )}
                {Object.keys(arm.params).length > 0 && (
                  <span className="muted small"> {formatParams(arm.params)}</span>
                )}
              </td>
              <td className="mono num">{formatCount(arm.steps)}</td>
              <td className="mono num">{formatMetric(arm.mean)}</td>
              <td className="mono num">{formatInterval(arm.low, arm.high)}</td>
              <td className="mono num">{arm.n}</td>
              <td className="mono small">
                {arm.values.length === 0
                  ? '—'
                  : arm.values.map((v) => `s${v.seed}: ${formatMetric(v.value)}`).join(', ')}
              </td>
              <td className="mono num">{arm.failed}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
