/**
 * Every run of the peer's data dir, newest first: a virtualised table (only the rows on screen exist in the DOM,
 * so 1,000 runs paint at once), live through `run` events, with checkboxes to pick 2–8 runs for a comparison.
 */
import { useVirtualizer } from '@tanstack/react-virtual';
import { memo, useEffect, useRef } from 'react';
import { useShallow } from 'zustand/react/shallow';
import { MAX_COMPARED_RUNS, type RunSummary } from '../../../../swarm/common/runs-api.ts';
import { EmptyState } from '../../components/EmptyState.tsx';
import { Panel } from '../../components/Panel.tsx';
import { formatCount } from '../../format.ts';
import { appStore, useAppStore } from '../../store/index.ts';
import { loadRunsList, refreshRunSummaries } from '../../store/runs/loaders.ts';
import { comparePath, runPath } from '../../store/runs/route.ts';
import { runsSelectors } from '../../store/runs/selectors.ts';
import { apiRequest } from '../../api/page-client.ts';
import { formatEpisodeTime, formatReward } from '../episodes/format.ts';
import { useLiveRefresh } from '../use-live-refresh.ts';
import { formatDurationOrDash, formatPercent } from './format.ts';
import { RunStatusBadge } from './RunStatusBadge.tsx';
import { useNow } from './use-now.ts';

export const RUN_ROW_HEIGHT = 36;
/** Rows rendered beyond the visible ones, so fast scrolling does not show blanks. */
const OVERSCAN = 12;
/** How often the list is refetched while the event stream is down (no `run` events then). */
const FALLBACK_POLL_MS = 5_000;

/** The table's columns; `num` ones hold numbers, aligned right like their values. */
const COLUMNS = [
  { label: 'Name' },
  { label: 'Model' },
  { label: 'Status' },
  { label: 'Steps', num: true },
  { label: 'Best reward', num: true },
  { label: 'Last reward', num: true },
  { label: 'Last eval', num: true, title: 'Success on the held-out tasks at the latest evaluation' },
  { label: 'Started' },
  { label: 'Duration' },
] as const;

export function RunsListPanel() {
  const total = useAppStore((s) => s.runs.total);
  const error = useAppStore((s) => s.runs.listError);
  const selection = useAppStore((s) => s.runs.selection);
  useLiveRefresh(() => void loadRunsList(appStore, apiRequest()), null, { fallbackMs: FALLBACK_POLL_MS });
  useLiveRows();
  const canCompare = runsSelectors.canCompare(selection);
  return (
    <Panel
      title="Runs"
      testId="runs-panel"
      aside={
        <span className="count" data-testid="runs-total">
          {total === null ? '…' : formatCount(total)}
        </span>
      }
    >
      <div className="toolbar runs-toolbar">
        <span className="muted small" aria-live="polite" data-testid="runs-selection">
          {selection.length === 0 ? `Check 2–${MAX_COMPARED_RUNS} runs to compare them.` : `${selection.length} checked (2–${MAX_COMPARED_RUNS}).`}
        </span>
        <button
          type="button"
          className={`button ${canCompare ? 'button--primary' : ''}`}
          data-testid="runs-compare"
          disabled={!canCompare}
          onClick={() => appStore.getState().showView('runs', comparePath(selection))}
        >
          Compare
        </button>
        {selection.length > 0 && (
          <button type="button" className="button" onClick={() => appStore.getState().runSelectionCleared()}>
            Clear
          </button>
        )}
      </div>
      {error && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}
      {total === 0 ? (
        <EmptyState icon="runs" title="No training run yet">
          <p>A run starts when a model’s training loop takes its first batch; each configuration is a run of its own.</p>
        </EmptyState>
      ) : total === null && !error ? (
        <p className="muted" aria-busy="true">
          Loading runs…
        </p>
      ) : (
        <RunsTable selection={selection} />
      )}
    </Panel>
  );
}

/**
 * Keeps the live runs' rows moving: `run` events come on status, config and warning changes, not per step, so
 * each step of a model (its `train-step`, as the models slice records it) refetches the summaries of its live runs.
 */
function useLiveRows() {
  const liveIds = useAppStore(useShallow((s) => s.runs.list.filter(runsSelectors.isLive).map((r) => r.id)));
  const stepsSeen = useAppStore((s) =>
    Object.entries(s.models.byModel)
      .map(([model, m]) => `${model}:${m.lastPushedStep}`)
      .join('|'),
  );
  useEffect(() => {
    if (liveIds.length > 0) void refreshRunSummaries(appStore, apiRequest(), liveIds);
    // eslint-disable-next-line react-hooks/exhaustive-deps -- a step, not a change of the live set, is the trigger
  }, [stepsSeen]);
}

function RunsTable({ selection }: { selection: readonly string[] }) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const list = useAppStore((s) => s.runs.list);
  // eslint-disable-next-line react-hooks/incompatible-library -- the virtualizer is read during render on purpose; it re-renders on scroll itself
  const virtualizer = useVirtualizer({
    count: list.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => RUN_ROW_HEIGHT,
    overscan: OVERSCAN,
  });
  const full = selection.length >= MAX_COMPARED_RUNS;
  // Only a live run's duration moves with the clock: the others get a constant, so their memoised rows stay put.
  const now = useNow(list.some(runsSelectors.isLive));
  return (
    <div className="episode-table runs-table" role="table" aria-rowcount={list.length + 1} aria-label="Training runs">
      <div className="run-row run-row--head" role="row" aria-rowindex={1}>
        <div role="columnheader" className="run-cell">
          <span className="visually-hidden">Compare</span>
        </div>
        {COLUMNS.map((c) => (
          <div key={c.label} role="columnheader" className={`run-cell${'num' in c ? ' num' : ''}`} title={'title' in c ? c.title : undefined}>
            {c.label}
          </div>
        ))}
      </div>
      <div ref={scrollRef} className="episode-scroll runs-scroll" data-testid="runs-scroll">
        <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
          {virtualizer.getVirtualItems().map((item) => {
            const run = list[item.index];
            const checked = selection.includes(run.id);
            return (
              <RunRow key={run.id} index={item.index} start={item.start} run={run} checked={checked} canCheck={checked || !full} now={runsSelectors.isLive(run) ? now : 0} />
            );
          })}
        </div>
      </div>
    </div>
  );
}

/** One row; memoised, so scrolling re-renders only the rows that enter the window. */
const RunRow = memo(function RunRow({
  index,
  start,
  run,
  checked,
  canCheck,
  now,
}: {
  index: number;
  start: number;
  run: RunSummary;
  checked: boolean;
  canCheck: boolean;
  now: number;
}) {
  const live = runsSelectors.isLive(run);
  return (
    <div
      className="run-row"
      role="row"
      aria-rowindex={index + 2}
      aria-selected={checked}
      data-testid="run-row"
      data-run-id={run.id}
      style={{ transform: `translateY(${start}px)`, height: RUN_ROW_HEIGHT }}
    >
      <div role="cell" className="run-cell">
        <input
          type="checkbox"
          checked={checked}
          disabled={!canCheck}
          aria-label={`Compare ${run.name}`}
          data-testid="run-select"
          onChange={() => appStore.getState().runSelectionToggled(run.id)}
        />
      </div>
      <div role="cell" className="run-cell run-cell--name" title={run.id}>
        <a href={`#/runs/${runPath(run.id)}`} data-testid="run-link">
          {run.name}
        </a>
        {run.warnings.length > 0 && (
          <span className="state-tag" data-state="discarded" title={run.warnings.map((w) => w.message).join('\n')}>
            {run.warnings.length === 1 ? 'warning' : `${run.warnings.length} warnings`}
          </span>
        )}
      </div>
      <div role="cell" className="run-cell">
        {run.model}
      </div>
      <div role="cell" className="run-cell">
        <RunStatusBadge status={run.status} />
      </div>
      <div role="cell" className="run-cell mono num">
        {formatCount(run.steps)}
      </div>
      <div role="cell" className="run-cell mono num">
        {formatReward(run.bestReward)}
      </div>
      <div role="cell" className="run-cell mono num">
        {formatReward(run.lastReward)}
      </div>
      <div role="cell" className="run-cell mono num" title={run.lastEval ? `step ${run.lastEval.step}, ${run.lastEval.episodes} episodes` : undefined}>
        {formatPercent(run.lastEval?.successRate)}
      </div>
      <div role="cell" className="run-cell mono small" title={run.createdAt}>
        {formatEpisodeTime(run.createdAt)}
      </div>
      <div role="cell" className="run-cell mono small">
        {formatDurationOrDash(runsSelectors.durationS(run, now))}
        {live && <span className="visually-hidden"> so far</span>}
      </div>
    </div>
  );
});
