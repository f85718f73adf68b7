/**
 * The timeline merge view: for one episode, every LLM call as a row and every merged timeline as a lane, drawn
 * token by token (prompt / environment / generated, generated shaded by probability), with each call's merge
 * decision and what merging saved for the episode and for the run.
 */
import { useRef, useState, type FormEvent } from 'react';
import { EmptyState } from '../../components/EmptyState.tsx';
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import {
  CALL_ROW_HEIGHT,
  LANE_GAP,
  LANE_ROW_HEIGHT,
  fitViewport,
  zoomViewport,
  type MergeLayout,
  type ViewRow,
} from '../../store/timeline/layout.ts';
import { loadTimeline } from '../../store/timeline/loaders.ts';
import { MERGE_REASON_LABELS, timelineSelectors } from '../../store/timeline/selectors.ts';
import { apiRequest } from '../../api/page-client.ts';
import { MergeCanvas, ZOOM_STEP } from './MergeCanvas.tsx';
import { SavingsPanel } from './SavingsPanel.tsx';
import { TokenTooltip } from './TokenTooltip.tsx';
import '../episodes/data-views.css';
import './timeline.css';

export function TimelineMergeView() {
  const episodeId = useAppStore((s) => s.timeline.episodeId);
  const loading = useAppStore((s) => s.timeline.loading);
  const error = useAppStore((s) => s.timeline.error);
  const layout = useAppStore((s) => s.timeline.layout);
  const doc = useAppStore((s) => s.timeline.doc);

  return (
    <div className="stack merge-view">
      <EpisodePicker current={episodeId} />
      {error && (
        <div className="panel merge-view__error" role="alert">
          Could not load episode {episodeId}: {error}
        </div>
      )}
      {!episodeId && (
        <Panel title="Merged timelines">
          <EmptyState icon="timeline" title="Choose an episode to inspect">
            <p>
              Open an episode from the Episodes view (“Merge view”), or paste its id above. Each training
              sequence is drawn token by token, with every merge decision and the tokens the merge saved over
              one sample per call.
            </p>
          </EmptyState>
        </Panel>
      )}
      {episodeId && !doc && loading && (
        <div className="panel waiting" aria-busy="true">
          <div className="spinner" aria-hidden="true" />
          <p>Loading episode {episodeId}…</p>
        </div>
      )}
      {doc && layout && (
        <>
          <SavingsPanel />
          <MergePanel layout={layout} />
          <DecisionPanel />
        </>
      )}
    </div>
  );
}

function EpisodePicker({ current }: { current: string | null }) {
  const [draft, setDraft] = useState(current ?? '');
  const mode = useAppStore((s) => s.timeline.mode);
  function submit(event: FormEvent) {
    event.preventDefault();
    const id = draft.trim();
    if (id) loadTimeline(appStore, apiRequest(), id, mode);
  }
  return (
    <form className="toolbar" onSubmit={submit} aria-label="Choose an episode">
      <label className="field">
        <span className="field__label">Episode id</span>
        <input
          className="input mono"
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          placeholder="paste an episode id"
          spellCheck={false}
        />
      </label>
      <button type="submit" className="button">
        Open
      </button>
      {current && (
        <div className="segmented" role="group" aria-label="Merge mode">
          {(['merged', 'naive'] as const).map((m) => (
            <button
              key={m}
              type="button"
              className="segmented__item"
              aria-pressed={mode === m}
              onClick={() => loadTimeline(appStore, apiRequest(), current, m)}
            >
              {m === 'merged' ? 'Merged' : 'Naive (one per call)'}
            </button>
          ))}
        </div>
      )}
    </form>
  );
}

function MergePanel({ layout }: { layout: MergeLayout }) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const doc = useAppStore((s) => s.timeline.doc);
  const { joined, started } = timelineSelectors.decisionCounts(doc);
  return (
    <Panel
      title="Merged timelines"
      testId="merge-panel"
      aside={
        <span className="muted small">
          {layout.calls.length} calls · {layout.lanes.length} {layout.lanes.length === 1 ? 'lane' : 'lanes'} ·{' '}
          {joined} joined, {started} started
        </span>
      }
    >
      <div className="merge-toolbar">
        <div className="legend" aria-label="Token legend">
          <span className="legend__item" data-kind="prompt">
            Prompt (mask 0)
          </span>
          <span className="legend__item" data-kind="generated">
            Generated, trained on (mask 1; paler = less likely)
          </span>
          <span className="legend__item" data-kind="masked">
            Tool results and user turns (mask 0)
          </span>
          <span className="legend__item" data-kind="reused">
            Prefix already in the timeline
          </span>
        </div>
        <ZoomControls layout={layout} />
      </div>
      <p id="merge-keys" className="hint">
        Ctrl/⌘ + wheel or +/− zooms, Shift + wheel, drag or ←/→ pans, 0 fits the episode, ↑/↓ chooses a call.
        Hover a token for its text, id and logprob.
      </p>
      <div className="merge-scroll" ref={scrollRef} data-testid="merge-scroll">
        <div className="merge-grid" style={{ height: layout.height }}>
          <RowLabels layout={layout} />
          <div className="merge-grid__canvas">
            <MergeCanvas layout={layout} scrollRef={scrollRef} />
            <TokenTooltip layout={layout} />
          </div>
        </div>
      </div>
    </Panel>
  );
}

function ZoomControls({ layout }: { layout: MergeLayout }) {
  const viewport = useAppStore((s) => s.timeline.viewport);
  const width = () => document.querySelector('.merge-canvas')?.clientWidth ?? 800;
  const zoom = (factor: number) => {
    if (viewport)
      appStore
        .getState()
        .timelineViewportChanged(zoomViewport(viewport, factor, width() / 2, layout.maxTokens, width()));
  };
  return (
    <div className="zoom-controls" role="group" aria-label="Zoom">
      <button
        type="button"
        className="button button--small"
        onClick={() => zoom(1 / ZOOM_STEP)}
        aria-label="Zoom out"
      >
        −
      </button>
      <span className="zoom-controls__value mono small" data-testid="zoom-level">
        {viewport ? zoomText(viewport.pxPerToken) : '—'}
      </span>
      <button
        type="button"
        className="button button--small"
        onClick={() => zoom(ZOOM_STEP)}
        aria-label="Zoom in"
      >
        +
      </button>
      <button
        type="button"
        className="button button--small"
        onClick={() => appStore.getState().timelineViewportChanged(fitViewport(layout.maxTokens, width()))}
      >
        Whole episode
      </button>
    </div>
  );
}

function zoomText(pxPerToken: number): string {
  return pxPerToken >= 1
    ? `${pxPerToken.toFixed(pxPerToken >= 10 ? 0 : 1)} px/token`
    : `${formatCount(Math.round(1 / pxPerToken))} tokens/px`;
}

/** The left column: one label per lane and per call, at the canvas rows' heights. */
function RowLabels({ layout }: { layout: MergeLayout }) {
  const selected = useAppStore((s) => s.timeline.selectedCallId);
  return (
    <ol className="merge-labels" aria-label="Calls and their merge decisions">
      {layout.rows.map((row) => (
        <RowLabel
          key={row.type === 'lane' ? `lane-${row.laneIndex}` : row.call.callId}
          row={row}
          layout={layout}
          selected={row.type === 'call' && row.call.callId === selected}
        />
      ))}
    </ol>
  );
}

function RowLabel({ row, layout, selected }: { row: ViewRow; layout: MergeLayout; selected: boolean }) {
  if (row.type === 'lane') {
    const timeline = layout.lanes[row.laneIndex].timeline;
    return (
      <li
        className="merge-label merge-label--lane"
        style={{ height: LANE_ROW_HEIGHT, marginTop: row.laneIndex > 0 ? LANE_GAP : 0 }}
        data-testid="merge-lane"
      >
        <strong>Timeline {row.laneIndex + 1}</strong>
        <span className="muted small">
          {formatCount(timeline.tokens.length)} tokens · {timeline.callIds.length} calls
        </span>
      </li>
    );
  }
  const { call } = row;
  const decision = call.decision;
  return (
    <li style={{ height: CALL_ROW_HEIGHT }}>
      <button
        type="button"
        className="merge-label merge-label--call"
        aria-pressed={selected}
        data-testid="merge-call"
        data-action={decision?.action}
        onClick={() => appStore.getState().timelineCallSelected(call.callId)}
        title={decision?.detail}
      >
        <span className="mono">#{call.callIndex + 1}</span>
        <span className="decision-badge" data-action={decision?.action ?? 'unknown'}>
          {decision?.action ?? '?'}
        </span>
        <span className="merge-label__reason">
          {decision ? MERGE_REASON_LABELS[decision.reason] : 'No decision recorded'}
        </span>
      </button>
    </li>
  );
}

function DecisionPanel() {
  const decision = useAppStore((s) => timelineSelectors.selectedDecision(s.timeline));
  const call = useAppStore(
    (s) => s.timeline.doc?.calls.find((c) => c.callId === s.timeline.selectedCallId) ?? null,
  );
  const row = useAppStore(
    (s) => s.timeline.layout?.calls.find((c) => c.callId === s.timeline.selectedCallId) ?? null,
  );
  if (!decision || !call || !row)
    return (
      <p className="hint">
        Choose a call (click its row, or ↑/↓ on the canvas) to see why it joined or started a timeline.
      </p>
    );
  return (
    <Panel
      title="Merge decision"
      testId="decision-panel"
      aside={
        <span className="decision-badge" data-action={decision.action}>
          {decision.action}
        </span>
      }
    >
      <p className="decision-detail">
        <strong>
          Call #{call.index + 1}: {MERGE_REASON_LABELS[decision.reason]}.
        </strong>{' '}
        {decision.detail}
      </p>
      <dl className="facts">
        <Row label="Timeline">{decision.timelineId}</Row>
        <Row label="Shared prefix">{formatCount(decision.sharedPrefixTokens)} tokens</Row>
        <Row label="New prompt tokens">{formatCount(decision.newPromptTokens)}</Row>
        <Row label="Generated tokens">{formatCount(row.end - row.generatedStart)}</Row>
        {decision.comparedTimelineId && <Row label="Compared with">{decision.comparedTimelineId}</Row>}
        {decision.divergedAt !== null && (
          <Row label="Diverged at token">{formatCount(decision.divergedAt)}</Row>
        )}
        <Row label="Policy version">v{call.policyVersion}</Row>
        <Row label="Splices">
          {call.splice.splicedTurns} of {call.splice.assistantTurns} assistant turns spliced, drift prevented
          in {call.splice.driftPreventedTurns}
        </Row>
      </dl>
    </Panel>
  );
}

function Row({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div className="facts__row">
      <dt>{label}</dt>
      <dd className="mono">{children}</dd>
    </div>
  );
}
