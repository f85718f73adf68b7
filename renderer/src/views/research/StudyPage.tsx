/**
 * One study: what it asks and how it will be decided (header), Stop / Resume, its runs with their live phase and
 * step, its events, and once analysed the arms, their curves, the decision, the threats and the report. Live: a
 * `study` event for it refetches the detail, at most every STUDY_REFRESH_MIN_MS.
 */
import { useEffect, useRef, useState } from 'react';
import type { StudyAnalysis, StudyDetail } from '../../../../swarm/common/research-api.ts';
import { describeError } from '../../api/errors.ts';
import { apiRequest, pageClient } from '../../api/page-client.ts';
import { Fact, Facts, Panel } from '../../components/Panel.tsx';
import { appStore, useAppStore } from '../../store/index.ts';
import {
  loadStudyDetail,
  STUDY_REFRESH_MIN_MS,
  studyAction,
  studyReportPath,
  throttle,
  type Throttle,
} from '../../store/research/loaders.ts';
import { researchSelectors } from '../../store/research/selectors.ts';
import { formatEpisodeTime } from '../episodes/format.ts';
import { useLiveRefresh } from '../use-live-refresh.ts';
import { formatRunsDone, formatStage } from './format.ts';
import { DecisionBadge, StudyStatusBadge } from './StudyBadges.tsx';
import { StudyCharts } from './StudyCharts.tsx';
import { ArmsTable, StudyEventsTable, StudyRunsTable } from './StudyTables.tsx';

/** How often the study is refetched while the event stream is down. */
const FALLBACK_POLL_MS = 3_000;

export function StudyPage({ id }: { id: string }) {
  const record = useAppStore((s) => researchSelectors.record(s.research, id));
  useStudyLiveRefresh(id, record.changes);
  const detail = record.detail;

  if (!detail) {
    return (
      <div className="stack">
        <BackToStudies />
        {record.error ? (
          <p className="alert" role="alert" data-testid="study-error">
            {record.error}
          </p>
        ) : (
          <p className="muted" aria-busy="true">
            Loading the study…
          </p>
        )}
      </div>
    );
  }
  return (
    <div className="stack research-view" data-testid="study-page" data-study-id={detail.id}>
      <BackToStudies />
      <StudyHeader study={detail} />
      {detail.analysis && <AnalysisPanels study={detail} analysis={detail.analysis} />}
      <Panel
        title="Study runs"
        aside={<span className="count">{formatRunsDone(detail.runs)}</span>}
        testId="study-runs-panel"
      >
        <StudyRunsTable runs={detail.studyRuns} stages={detail.stages} />
      </Panel>
      <Panel title="Study events" aside={<span className="count">{detail.events.length}</span>}>
        <StudyEventsTable events={detail.events} />
      </Panel>
    </div>
  );
}

/** Loads the study on open and on reconnection, and again (throttled) on every `study` event for it. */
function useStudyLiveRefresh(id: string, changes: number) {
  const throttled = useRef<Throttle | null>(null);
  throttled.current ??= throttle(
    () => void loadStudyDetail(appStore, apiRequest(), id),
    STUDY_REFRESH_MIN_MS,
  );
  useEffect(() => () => throttled.current?.cancel(), []);
  useLiveRefresh(() => throttled.current?.call(), changes, { fallbackMs: FALLBACK_POLL_MS });
}

function BackToStudies() {
  return (
    <p>
      <a href="#/research" className="back-link">
        ← All studies
      </a>
    </p>
  );
}

function StudyHeader({ study }: { study: StudyDetail }) {
  const criterion = researchSelectors.criterion(study);
  return (
    <Panel
      title={`Study ${study.name}`}
      testId="study-header"
      aside={<StudyStatusBadge status={study.status} />}
    >
      <div className="stack">
        <div className="grid grid--two">
          <Facts>
            <Fact label="Question" testId="study-question">
              {study.question}
            </Fact>
            <Fact label="Hypothesis" testId="study-hypothesis">
              {study.hypothesis || '—'}
            </Fact>
            <Fact label="Criterion" testId="study-criterion">
              {criterion ?? <span className="muted">No decision criterion.</span>}
            </Fact>
            <Fact label="Status" testId="study-status-line">
              <StudyStatusBadge status={study.status} testId="study-status-fact" />
              {study.reason && <span className="study-reason"> {study.reason}</span>}
            </Fact>
            <Fact label="Decision">
              <DecisionBadge outcome={study.decision} />
            </Fact>
          </Facts>
          <Facts>
            <Fact label="Stage">{formatStage(study)}</Fact>
            <Fact label="Runs">
              {formatRunsDone(study.runs)}
              <span className="muted small">
                {' '}
                ({study.runs.running} running{study.runs.stopped > 0 ? `, ${study.runs.stopped} stopped` : ''}
                )
              </span>
            </Fact>
            <Fact label="Planner">{study.planner}</Fact>
            <Fact label="Created">{formatEpisodeTime(study.createdAt)}</Fact>
            <Fact label="Ended">{study.endedAt ? formatEpisodeTime(study.endedAt) : '—'}</Fact>
            <Fact label="Id">
              <span className="mono small">{study.id}</span>
            </Fact>
          </Facts>
        </div>
        <StudyActions study={study} />
      </div>
    </Panel>
  );
}

function StudyActions({ study }: { study: StudyDetail }) {
  const [busy, setBusy] = useState<'stop' | 'resume' | null>(null);
  const [error, setError] = useState<string | null>(null);
  const act = async (action: 'stop' | 'resume') => {
    setBusy(action);
    setError(null);
    const request = apiRequest();
    try {
      await studyAction(appStore, request, study.id, action);
      await loadStudyDetail(appStore, request, study.id);
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(null);
    }
  };
  return (
    <div className="stack">
      <div className="toolbar" role="group" aria-label="Study actions">
        <button
          type="button"
          className="button"
          data-testid="study-stop"
          disabled={busy !== null || !researchSelectors.canStop(study.status)}
          onClick={() => void act('stop')}
        >
          {busy === 'stop' ? 'Stopping…' : 'Stop'}
        </button>
        <button
          type="button"
          className="button"
          data-testid="study-resume"
          disabled={busy !== null || !researchSelectors.canResume(study.status)}
          onClick={() => void act('resume')}
        >
          {busy === 'resume' ? 'Resuming…' : 'Resume'}
        </button>
      </div>
      {error && (
        <p className="alert" role="alert" data-testid="study-action-error">
          {error}
        </p>
      )}
    </div>
  );
}

function AnalysisPanels({ study, analysis }: { study: StudyDetail; analysis: StudyAnalysis }) {
  return (
    <>
      <Panel
        title="Decision"
        testId="study-decision-panel"
        aside={<DecisionBadge outcome={analysis.decision?.outcome ?? null} />}
      >
        <div className="stack">
          <p data-testid="study-decision-statement">
            {analysis.decision?.statement ?? (
              <span className="muted">Not decided yet: the arms have too few finished runs.</span>
            )}
          </p>
          <p className="muted small">
            Metric: <span className="mono">{analysis.metric}</span>. Criterion, as written before any result:{' '}
            {analysis.criterion}
          </p>
          <ReportLink study={study} />
        </div>
      </Panel>
      <Panel title="Arms" aside={<span className="count">{analysis.arms.length}</span>}>
        <ArmsTable arms={analysis.arms} best={analysis.best} />
      </Panel>
      <Panel title="Study curves" testId="study-curves">
        <StudyCharts id={study.id} analysis={analysis} />
      </Panel>
      <Panel title="Threats to validity" aside={<span className="count">{analysis.threats.length}</span>}>
        {analysis.threats.length === 0 ? (
          <p className="muted">None noted.</p>
        ) : (
          <ul className="study-threats" data-testid="study-threats">
            {analysis.threats.map((threat, i) => (
              <li key={i}>{threat}</li>
            ))}
          </ul>
        )}
      </Panel>
    </>
  );
}

/**
 * The report (HTML, plots inline). The API wants the bearer token, which a plain link cannot send: the click
 * fetches it through the page's client and saves it, like a checkpoint archive.
 */
function ReportLink({ study }: { study: StudyDetail }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const path = studyReportPath(study.id);
  const open = async () => {
    setBusy(true);
    setError(null);
    try {
      await pageClient().download(path, `${study.name}-report.html`);
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="stack">
      <p>
        <a
          href={`/api${path}`}
          className="button"
          data-testid="study-report"
          aria-disabled={busy}
          onClick={(event) => {
            event.preventDefault();
            if (!busy) void open();
          }}
        >
          {busy ? 'Fetching the report…' : 'Open report'}
        </a>
      </p>
      {error && (
        <p className="alert" role="alert">
          Report failed: {error}
        </p>
      )}
    </div>
  );
}
