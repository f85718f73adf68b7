/**
 * Every study of the peer, newest first: what it asks, where it stands (stage, runs) and what it decided. Live
 * through `study` events (each carries the study's summary, so its row follows without a request).
 */
import type { StudySummary } from '../../../../swarm/common/research-api.ts';
import { apiRequest } from '../../api/page-client.ts';
import { EmptyState } from '../../components/EmptyState.tsx';
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { loadStudies } from '../../store/research/loaders.ts';
import { studyPath } from '../../store/research/route.ts';
import { formatEpisodeTime } from '../episodes/format.ts';
import { useLiveRefresh } from '../use-live-refresh.ts';
import { formatRunsDone, formatStage } from './format.ts';
import { DecisionBadge, StudyStatusBadge } from './StudyBadges.tsx';

/** How often the list is refetched while the event stream is down (no `study` events then). */
const FALLBACK_POLL_MS = 5_000;

export function StudiesListPanel() {
  const list = useAppStore((s) => s.research.list);
  const error = useAppStore((s) => s.research.listError);
  useLiveRefresh(() => void loadStudies(appStore, apiRequest()), null, { fallbackMs: FALLBACK_POLL_MS });
  return (
    <Panel
      title="Studies"
      testId="studies-panel"
      aside={
        <span className="count" data-testid="studies-total">
          {list === null ? '…' : formatCount(list.length)}
        </span>
      }
    >
      {error && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}
      {list?.length === 0 ? (
        <EmptyState icon="research" title="No study yet">
          <p>
            A study asks one question, writes down before any run how it will be decided, then trains its arms
            over several seeds and reports what it found. Submit a study file (POST /api/studies) or ask the
            planner.
          </p>
        </EmptyState>
      ) : list === null ? (
        !error && (
          <p className="muted" aria-busy="true">
            Loading studies…
          </p>
        )
      ) : (
        <StudiesTable studies={list} />
      )}
    </Panel>
  );
}

function StudiesTable({ studies }: { studies: readonly StudySummary[] }) {
  return (
    <div className="table-wrap">
      <table className="table studies-table" data-testid="studies-table">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Question</th>
            <th scope="col">Status</th>
            <th scope="col" className="num">
              Stage
            </th>
            <th scope="col" className="num" title="Runs done of all the study's runs (failed ones after)">
              Runs
            </th>
            <th scope="col">Decision</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {studies.map((study) => (
            <tr key={study.id} data-testid="study-row" data-study-id={study.id}>
              <td title={study.id}>
                <a href={`#/research/${studyPath(study.id)}`} data-testid="study-link" className="study-name">
                  {study.name}
                </a>
              </td>
              <td className="study-question">{study.question}</td>
              <td>
                <StudyStatusBadge status={study.status} />
              </td>
              <td className="mono num">{formatStage(study)}</td>
              <td className="mono num" data-testid="study-runs">
                {formatRunsDone(study.runs)}
              </td>
              <td>
                <DecisionBadge outcome={study.decision} />
              </td>
              <td className="mono small" title={study.createdAt}>
                {formatEpisodeTime(study.createdAt)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
