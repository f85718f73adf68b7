/**
 * The episode list: a virtualised window over the control API's pages (only the rows on screen exist in the
 * DOM; pages load as they scroll into view). ↑/↓/PageUp/PageDown/Home/End move the active row, Enter opens it.
 */
import { useVirtualizer } from '@tanstack/react-virtual';
import { memo, useCallback, useEffect, useRef, useState, type KeyboardEvent } from 'react';
import { appStore, useAppStore } from '../../store/index.ts';
import { loadVisibleEpisodes, openEpisode } from '../../store/episodes/loaders.ts';
import { episodesSelectors } from '../../store/episodes/selectors.ts';
import type { EpisodeListItem, EpisodeSort } from '../../store/episodes/types.ts';
import { apiRequest } from '../../api/page-client.ts';
import { formatEpisodeTime, formatReward, shortHash } from './format.ts';

export const EPISODE_ROW_HEIGHT = 36;
/** Rows rendered beyond the visible ones, so fast scrolling does not show blanks. */
const OVERSCAN = 12;

export function EpisodesList() {
  const scrollRef = useRef<HTMLDivElement>(null);
  const episodes = useAppStore((s) => s.episodes);
  const count = episodesSelectors.rowCount(episodes);
  const [active, setActive] = useState(0);
  // eslint-disable-next-line react-hooks/incompatible-library -- the virtualizer is read during render on purpose; it re-renders on scroll itself
  const virtualizer = useVirtualizer({
    count,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => EPISODE_ROW_HEIGHT,
    overscan: OVERSCAN,
  });
  const items = virtualizer.getVirtualItems();
  const first = items.length ? items[0].index : 0;
  const last = items.length ? items[items.length - 1].index : 0;

  useEffect(() => {
    loadVisibleEpisodes(appStore, apiRequest(), first, last);
  }, [first, last, episodes.generation, episodes.total, episodes.pages, episodes.pending]);

  const open = useCallback((id: string, index: number) => {
    setActive(index);
    openEpisode(appStore, apiRequest(), id);
  }, []);

  function moveTo(index: number) {
    const next = Math.max(0, Math.min(count - 1, index));
    setActive(next);
    virtualizer.scrollToIndex(next, { align: 'auto' });
  }

  function onKeyDown(event: KeyboardEvent<HTMLDivElement>) {
    const page = Math.max(1, Math.floor((scrollRef.current?.clientHeight ?? 400) / EPISODE_ROW_HEIGHT) - 1);
    const moves: Record<string, number> = {
      ArrowDown: active + 1,
      ArrowUp: active - 1,
      PageDown: active + page,
      PageUp: active - page,
      Home: 0,
      End: count - 1,
    };
    if (event.key in moves) {
      event.preventDefault();
      moveTo(moves[event.key]);
    } else if (event.key === 'Enter' || event.key === ' ') {
      const row = episodesSelectors.rowAt(episodes, active);
      if (row) {
        event.preventDefault();
        openEpisode(appStore, apiRequest(), row.id);
      }
    }
  }

  if (count === 0) return null; // the effect above still asks for page 0 when episodes may have arrived

  return (
    <div className="episode-table" role="grid" aria-rowcount={count + 1} aria-label="Episodes">
      <div className="episode-row episode-row--head" role="row" aria-rowindex={1}>
        {COLUMNS.map((c) =>
          c === 'Reward' ? (
            <RewardHeader key={c} sort={episodes.filter.sort} />
          ) : (
            <div key={c} role="columnheader" className={`episode-cell episode-cell--${c.toLowerCase()}`}>
              {c}
            </div>
          ),
        )}
      </div>
      <div
        ref={scrollRef}
        className="episode-scroll"
        tabIndex={0}
        data-testid="episode-scroll"
        onKeyDown={onKeyDown}
        aria-activedescendant={count > 0 ? `episode-row-${active}` : undefined}
        aria-label="Episode rows: arrows move, Enter opens"
      >
        <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
          {items.map((item) => {
            const row = episodesSelectors.rowAt(episodes, item.index);
            return (
              <EpisodeRow
                key={item.key}
                index={item.index}
                start={item.start}
                row={row}
                active={item.index === active}
                selected={row !== undefined && row.id === episodes.selectedId}
                onOpen={open}
              />
            );
          })}
        </div>
      </div>
    </div>
  );
}

const COLUMNS = ['Time', 'Model', 'Script', 'Task', 'Reward', 'Version', 'State', 'Calls', 'Saved'] as const;

/** The Reward header sorts: highest first, lowest first, then back to the time order (the filter's sort). */
function RewardHeader({ sort }: { sort: EpisodeSort }) {
  const ariaSort = sort === 'reward-desc' ? 'descending' : sort === 'reward-asc' ? 'ascending' : 'none';
  return (
    <div role="columnheader" className="episode-cell episode-cell--reward" aria-sort={ariaSort}>
      <button
        type="button"
        className="episode-sort"
        data-testid="episodes-sort-reward"
        data-sort={ariaSort}
        title="Sort by reward (episodes without one last)"
        onClick={() => appStore.getState().episodeFilterChanged({ sort: episodesSelectors.nextRewardSort(sort) })}
      >
        Reward{sort === 'reward-desc' ? ' ↓' : sort === 'reward-asc' ? ' ↑' : ''}
      </button>
    </div>
  );
}

/** One row; memoised, so scrolling re-renders only the rows that enter the window. */
const EpisodeRow = memo(function EpisodeRow({
  index,
  start,
  row,
  active,
  selected,
  onOpen,
}: {
  index: number;
  start: number;
  row: EpisodeListItem | undefined;
  active: boolean;
  selected: boolean;
  onOpen: (id: string, index: number) => void;
}) {
  const style = { transform: `translateY(${start}px)`, height: EPISODE_ROW_HEIGHT };
  if (!row) {
    return (
      <div
        id={`episode-row-${index}`}
        className="episode-row episode-row--loading"
        role="row"
        aria-rowindex={index + 2}
        style={style}
        aria-busy="true"
      >
        <div className="episode-cell skeleton" />
      </div>
    );
  }
  return (
    <div
      id={`episode-row-${index}`}
      className="episode-row"
      role="row"
      aria-rowindex={index + 2}
      aria-selected={selected}
      data-active={active || undefined}
      data-testid="episode-row"
      data-episode-id={row.id}
      style={style}
      onClick={() => onOpen(row.id, index)}
    >
      <div role="gridcell" className="episode-cell episode-cell--time mono" title={row.createdAt}>
        {formatEpisodeTime(row.createdAt)}
      </div>
      <div role="gridcell" className="episode-cell episode-cell--model">
        {row.model}
      </div>
      <div role="gridcell" className="episode-cell episode-cell--script" title={row.scriptHash ?? undefined}>
        {row.client ?? <span className="muted">—</span>}{' '}
        <span className="mono muted small">{row.scriptHash ? shortHash(row.scriptHash) : ''}</span>
      </div>
      <div role="gridcell" className="episode-cell episode-cell--task" title={row.taskId}>
        {row.taskId}
        {row.kind === 'eval' && <span className="state-tag">eval</span>}
      </div>
      <div role="gridcell" className="episode-cell episode-cell--reward mono">
        {formatReward(row.reward)}
      </div>
      <div role="gridcell" className="episode-cell episode-cell--version mono">
        v{row.policyVersion}
      </div>
      <div role="gridcell" className="episode-cell episode-cell--state">
        <span className="state-tag" data-state={row.state} title={row.abortReason ?? undefined}>
          {row.state}
        </span>
      </div>
      <div role="gridcell" className="episode-cell episode-cell--calls mono">
        {row.calls}
      </div>
      <div role="gridcell" className="episode-cell episode-cell--saved mono">
        {row.savings ? `${row.savings.tokenRatio.toFixed(2)}×` : '—'}
      </div>
    </div>
  );
});
