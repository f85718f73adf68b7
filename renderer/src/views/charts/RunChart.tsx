/**
 * The chart every training view plots with: one metric over training steps for one run or up to eight overlaid
 * ones. W&B habits kept: EMA smoothing from the page's slider (smoothed line solid, raw line faint behind it; the
 * legend reads raw and smoothed values at the cursor), a per-panel log axis, crosshair and x-zoom synced across
 * the panels of a page, drag to zoom and double-click to reset, event markers, full screen, PNG/SVG download.
 *
 * Speed: the uPlot instance is built once per shape (which series, smoothing on/off, log, format) and fed with
 * setData; alignment and smoothing are memoised per data version; the live legend is written directly into the
 * DOM from uPlot's cursor hook, so moving the cursor or zooming renders no React component.
 */
import { useEffect, useLayoutEffect, useMemo, useRef, useState, type CSSProperties, type JSX, type ReactNode } from 'react';
import { createPortal } from 'react-dom';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './charts.css';
import { integerXRange } from '../../../../swarm/common/charts/axis.ts';
import { formatStep, formatValue } from '../../../../swarm/common/charts/format.ts';
import { useAppStore } from '../../store/index.ts';
import {
  alignSeries,
  columnLayout,
  isMainColumn,
  lastIndex,
  nearestIndex,
  plotColumns,
  SHOW_ALL_POINTS_MAX,
  stepExtent,
  type AlignedChart,
  type ColumnRole,
} from './chart-data.ts';
import { runChartSvg } from './chart-export.ts';
import type { RunChartProps } from './chart-types.ts';
import { downloadPng, downloadSvg } from './download.ts';
import { drawMarkers, MARKER_HOVER_PX, markersNear, markerStyle } from './markers.ts';
import { cssColour } from './palette.ts';
import { buildPlotOptions, type PlotShape } from './uplot-options.ts';
import { zoomGroups, type ZoomMember, type ZoomRange } from './zoom-sync.ts';

export type { ChartFormat, ChartMarker, ChartMarkerKind, ChartSeries, RunChartProps } from './chart-types.ts';
export { compareColour } from './palette.ts';
export { ChartToolbar, type ChartToolbarProps } from './ChartToolbar.tsx';

/** Plot height (CSS px) in a panel grid: tall enough for five y ticks, short enough for eight panels on a page. */
export const PANEL_HEIGHT = 200;
/** Narrowest plot uPlot is asked to draw: below this the axes crowd the lines out. */
const MIN_PLOT_WIDTH = 200;
/** Full screen: the plot takes this share of the window's height, at least OVERLAY_MIN_HEIGHT px. */
const OVERLAY_HEIGHT_SHARE = 0.72;
const OVERLAY_MIN_HEIGHT = 320;
/** Two x ranges closer than this (in steps) are the same range: float noise from pixel ↔ value conversions. */
const RANGE_EPSILON = 1e-6;

type Variant = 'panel' | 'overlay';

export function RunChart(props: RunChartProps): JSX.Element {
  const panelId = props.panelId ?? props.testId ?? props.title;
  const fullScreen = useAppStore((s) => s.charts.fullScreen === panelId);
  const showFullScreen = useAppStore((s) => s.showChartFullScreen);
  return (
    <>
      <ChartPanel {...props} panelId={panelId} variant="panel" />
      {fullScreen
        ? createPortal(
            <FullScreen title={props.title} onClose={() => showFullScreen(null)}>
              <ChartPanel {...props} panelId={panelId} variant="overlay" />
            </FullScreen>,
            document.body,
          )
        : null}
    </>
  );
}

/** What the uPlot hooks read: the latest render's data, kept in a ref so hooks never see stale props. */
interface Live {
  props: RunChartProps;
  aligned: AlignedChart;
  layout: readonly ColumnRole[];
  columns: (number | null)[][];
  smoothed: boolean;
}

function ChartPanel(props: RunChartProps & { panelId: string; variant: Variant }): JSX.Element {
  const { title, series, panelId, variant, off, logScaleAllowed, version } = props;
  const smoothing = useAppStore((s) => s.charts.smoothing);
  const logOn = useAppStore((s) => s.charts.logScale.includes(panelId));
  const setLogScale = useAppStore((s) => s.setChartLogScale);
  const showFullScreen = useAppStore((s) => s.showChartFullScreen);
  const format = props.format ?? 'number';
  const [overlayHeight] = useState(() => Math.max(OVERLAY_MIN_HEIGHT, Math.round(window.innerHeight * OVERLAY_HEIGHT_SHARE)));
  const height = variant === 'overlay' ? overlayHeight : (props.height ?? PANEL_HEIGHT);
  // The overlay zooms on its own: zooming the big view should not move the page behind it.
  const syncKey = variant === 'overlay' ? undefined : props.syncKey;

  const seriesShape = series.map((s) => [s.key, s.label, s.colour, s.dashed ? 1 : 0, s.band ? 1 : 0].join('\u0000')).join('\u0001');
  const yDomainKey = props.yDomain ? props.yDomain.join(',') : '';
  // eslint-disable-next-line react-hooks/exhaustive-deps -- `version` stands for the data arrays (the contract)
  const aligned = useMemo(() => alignSeries(series), [version, seriesShape]);
  const smoothed = smoothing > 0;
  // eslint-disable-next-line react-hooks/exhaustive-deps -- the layout depends only on which series have bands
  const layout = useMemo(() => columnLayout(series.map((s) => Boolean(s.band)), smoothed), [seriesShape, smoothed]);
  // eslint-disable-next-line react-hooks/exhaustive-deps -- yDomainKey stands for props.yDomain
  const columns = useMemo(() => plotColumns(aligned, layout, smoothing, props.yDomain), [aligned, layout, smoothing, yDomainKey]);
  const logPossible = aligned.allPositive;
  const log = Boolean(logScaleAllowed) && logOn && logPossible;
  const shapeKey = [seriesShape, smoothed, log, format, yDomainKey, height, syncKey ?? '', off ? 'off' : 'on'].join('|');

  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const live = useRef<Live | null>(null);
  const zoom = useRef<ZoomRange>(null);
  /** True while this component itself moves the x scale (setData, a synced zoom): such moves are not user zooms. */
  const applying = useRef(false);
  const legendStep = useRef<HTMLSpanElement>(null);
  const legendValues = useRef<(HTMLSpanElement | null)[]>([]);
  const legendMarker = useRef<HTMLSpanElement>(null);
  const [zoomed, setZoomed] = useState(false);
  /** This panel in its zoom group (set while a plot exists). */
  const zoomMember = useRef<ZoomMember | null>(null);

  useLayoutEffect(() => {
    live.current = { props, aligned, layout, columns, smoothed };
  });

  // Build the plot once per shape; data arrives through setData below.
  useEffect(() => {
    const element = host.current;
    const state = live.current;
    if (!element || !state || state.props.off) return;
    const resolve = (colour: string) => cssColour(element, colour);
    const shape: PlotShape = {
      series: state.props.series.map((s) => ({ label: s.label, colour: resolve(s.colour), dashed: Boolean(s.dashed) })),
      layout: state.layout,
      smoothed: state.smoothed,
      log,
      format,
      yDomain: state.props.yDomain,
      width: Math.max(MIN_PLOT_WIDTH, element.clientWidth),
      height,
      syncKey,
      theme: { text: resolve('--text-muted'), grid: resolve('--border') },
    };
    const fullRange = (): [number, number] => {
      const extent = live.current ? stepExtent(live.current.aligned) : null;
      return integerXRange(extent?.[0] ?? null, extent?.[1] ?? null);
    };
    const setX = (u: uPlot, range: readonly [number, number]) => {
      applying.current = true;
      try {
        u.batch(() => u.setScale('x', { min: range[0], max: range[1] }));
      } finally {
        applying.current = false;
      }
    };
    // A panel off screen takes a synced zoom when it scrolls into view: redrawing a dozen canvases per zoom is
    // what made an 8-run comparison stutter, and only the visible ones are looked at.
    let onScreen = true;
    let zoomStale = false;
    const member: ZoomMember = {
      applyZoom(range) {
        zoom.current = range;
        setZoomed(range !== null);
        if (!plot.current) return;
        if (onScreen) setX(plot.current, range ?? fullRange());
        else zoomStale = true;
      },
    };
    const options = buildPlotOptions(shape, {
      showAllPoints: (i) => (live.current?.aligned.counts[i] ?? 0) <= SHOW_ALL_POINTS_MAX,
      isolatedPoints: (i) => live.current?.aligned.isolated[i] ?? [],
      onCursor: (u) => writeLegend(u),
      onDraw: (u) => drawMarkers(u, live.current?.props.markers ?? [], resolve),
      onXScale: (u) => {
        if (applying.current) return;
        const { min, max } = u.scales.x;
        if (min === undefined || max === undefined) return;
        const [fullMin, fullMax] = fullRange();
        const range: ZoomRange = min > fullMin + RANGE_EPSILON || max < fullMax - RANGE_EPSILON ? [min, max] : null;
        if (sameRange(range, zoom.current)) return;
        zoom.current = range;
        setZoomed(range !== null);
        if (syncKey) zoomGroups.broadcast(syncKey, member, range);
      },
    });

    // The legend is written once per animation frame, after every synced panel has moved its cursor: writing it
    // inside the cursor hook would interleave DOM writes with uPlot's reads and force a layout per panel.
    let legendFrame = 0;
    const writeLegend = (u: uPlot) => {
      if (legendFrame) return;
      legendFrame = requestAnimationFrame(() => {
        legendFrame = 0;
        const current = live.current;
        if (current) updateLegend(u, current, { step: legendStep.current, values: legendValues.current, marker: legendMarker.current });
      });
    };

    applying.current = true;
    const created = new uPlot(options, toPlotData(state), element);
    applying.current = false;
    plot.current = created;
    if (zoom.current) setX(created, zoom.current);
    writeLegend(created);
    zoomMember.current = member;
    const leave = syncKey ? zoomGroups.join(syncKey, member) : () => {};
    const observer = new ResizeObserver(() => {
      const width = Math.max(MIN_PLOT_WIDTH, element.clientWidth);
      if (width !== created.width) created.setSize({ width, height });
    });
    observer.observe(element);
    const visibility = new IntersectionObserver((entries) => {
      onScreen = entries.some((entry) => entry.isIntersecting);
      if (onScreen && zoomStale) {
        zoomStale = false;
        setX(created, zoom.current ?? fullRange());
      }
    });
    visibility.observe(element);
    return () => {
      visibility.disconnect();
      observer.disconnect();
      cancelAnimationFrame(legendFrame);
      leave();
      zoomMember.current = null;
      created.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps -- rebuilt only when the shape changes; everything else is read from `live`
  }, [shapeKey]);

  // New data (or a new smoothing weight): setData, keeping a zoom the reader chose.
  useEffect(() => {
    const u = plot.current;
    const state = live.current;
    if (!u || !state) return;
    applying.current = true;
    try {
      u.batch(() => {
        u.setData(toPlotData(state));
        if (zoom.current) u.setScale('x', { min: zoom.current[0], max: zoom.current[1] });
      });
    } finally {
      applying.current = false;
    }
    updateLegend(u, state, { step: legendStep.current, values: legendValues.current, marker: legendMarker.current });
  }, [columns, shapeKey]);

  const resetZoom = () => {
    const member = zoomMember.current;
    if (!member) return;
    member.applyZoom(null);
    if (syncKey) zoomGroups.broadcast(syncKey, member, null);
  };

  const download = (kind: 'png' | 'svg') => {
    const element = host.current;
    const u = plot.current;
    if (!element) return;
    const resolve = (colour: string) => cssColour(element, colour);
    const saving =
      kind === 'png'
        ? u
          ? downloadPng(
              u,
              title,
              series.map((s) => ({ label: s.label, colour: resolve(s.colour) })),
              { background: resolve('--surface'), text: resolve('--text') },
            )
          : Promise.resolve()
        : downloadSvg(runChartSvg({ title, series, markers: props.markers, format, yDomain: props.yDomain, smoothing }, resolve), title);
    saving.catch((error: unknown) => console.warn(`Could not save the chart as ${kind}`, error));
  };

  const testId = props.testId && variant === 'overlay' ? `${props.testId}-fullscreen` : props.testId;
  const logTitle = logPossible ? 'Log scale' : 'Log scale needs every value above 0';

  return (
    <figure
      className={`run-chart run-chart--${variant}`}
      data-testid={testId}
      data-smoothing={String(smoothing)}
      data-log-scale={log ? 'true' : 'false'}
      data-zoomed={zoomed ? 'true' : 'false'}
    >
      <div className="run-chart__header">
        <figcaption className="run-chart__title" title={title}>
          {title}
        </figcaption>
        {off ? null : (
          <div className="run-chart__actions">
            {zoomed ? (
              <button type="button" className="run-chart__button" onClick={resetZoom} aria-label={`Reset zoom of ${title}`} title="Reset zoom (or double-click the plot)">
                Reset zoom
              </button>
            ) : null}
            {logScaleAllowed ? (
              <button
                type="button"
                className="run-chart__button"
                aria-label={`Log scale for ${title}`}
                aria-pressed={log}
                disabled={!logPossible}
                title={logTitle}
                onClick={() => setLogScale(panelId, !logOn)}
              >
                log
              </button>
            ) : null}
            <button type="button" className="run-chart__button" onClick={() => download('png')} aria-label={`Download ${title} as PNG`} title="Download PNG">
              PNG
            </button>
            <button type="button" className="run-chart__button" onClick={() => download('svg')} aria-label={`Download ${title} as SVG`} title="Download SVG">
              SVG
            </button>
            {variant === 'panel' ? (
              <button type="button" className="run-chart__button run-chart__button--icon" onClick={() => showFullScreen(panelId)} aria-label={`Show ${title} full screen`} title="Full screen">
                ⤢
              </button>
            ) : null}
          </div>
        )}
      </div>
      {off ? (
        <div className="run-chart__off" role="img" aria-label={`${title}: off. ${off}`} style={{ height }}>
          <strong>off</strong>
          <span>{off}</span>
        </div>
      ) : (
        <>
          <div className="run-chart__plot-wrap">
            <div
              ref={host}
              className="run-chart__plot"
              role="img"
              aria-label={`${title}: ${series.length === 1 ? series[0].label : `${series.length} series`} by training step${log ? ', log scale' : ''}${smoothed ? `, smoothed ${smoothing}` : ''}`}
              style={{ minHeight: height }}
            />
            {aligned.hasData ? null : <div className="run-chart__empty">No data yet</div>}
          </div>
          <div className="run-chart__legend">
            <span className="run-chart__legend-step" ref={legendStep} />
            {series.map((s, i) => (
              <span className="run-chart__legend-item" key={s.key}>
                <span
                  className={`run-chart__swatch${s.dashed ? ' run-chart__swatch--dashed' : ''}`}
                  style={{ '--swatch': s.colour.startsWith('--') ? `var(${s.colour})` : s.colour } as CSSProperties}
                  aria-hidden="true"
                />
                <span className="run-chart__legend-label">{s.label}</span>
                <span
                  className="run-chart__legend-value"
                  ref={(element) => {
                    legendValues.current[i] = element;
                  }}
                />
              </span>
            ))}
            <span className="run-chart__legend-marker" ref={legendMarker} />
          </div>
        </>
      )}
    </figure>
  );
}

/** The columns in uPlot's order: x, then the layout. */
function toPlotData(state: Live): uPlot.AlignedData {
  return [state.aligned.x, ...state.columns] as unknown as uPlot.AlignedData;
}

function sameRange(a: ZoomRange, b: ZoomRange): boolean {
  if (a === null || b === null) return a === b;
  return Math.abs(a[0] - b[0]) < RANGE_EPSILON && Math.abs(a[1] - b[1]) < RANGE_EPSILON;
}

/**
 * Writes the legend for the cursor's step (or each series' latest value when the pointer is elsewhere): per series the
 * smoothed value and the raw one, and the event markers under the cursor. Plain DOM writes, no React render.
 */
function updateLegend(
  u: uPlot,
  state: Live,
  elements: { step: HTMLSpanElement | null; values: readonly (HTMLSpanElement | null)[]; marker: HTMLSpanElement | null },
): void {
  const { aligned, layout, columns, smoothed } = state;
  const format = state.props.format ?? 'number';
  // Live values only in the panel under the pointer (as W&B's tooltip): the synced panels show their crosshair and
  // keep their latest values, so a cursor move relayouts one legend, not eight.
  const hovered = u.cursor.event !== null && u.cursor.event !== undefined;
  const cursor = hovered ? (u.cursor.idx ?? null) : null;
  if (elements.step) setText(elements.step, cursor === null ? 'latest' : `step ${formatStep(aligned.x[cursor])}`);
  state.props.series.forEach((_, i) => {
    const element = elements.values[i];
    if (!element) return;
    const raw = aligned.y[i];
    const at = cursor === null ? lastIndex(raw) : nearestIndex(raw ?? [], cursor);
    const rawValue = at >= 0 ? raw[at] : null;
    if (!smoothed) {
      setText(element, formatValue(rawValue, format));
      return;
    }
    const column = layout.findIndex((role) => role.series === i && isMainColumn(role, true));
    const smoothValue = at >= 0 && column >= 0 ? columns[column][at] : null;
    setText(element, `${formatValue(smoothValue, format)} (raw ${formatValue(rawValue, format)})`);
  });
  if (elements.marker) {
    const markers = state.props.markers ?? [];
    const left = u.cursor.left ?? -1;
    if (cursor === null || left < 0 || markers.length === 0) {
      setText(elements.marker, '');
      return;
    }
    const min = u.scales.x.min ?? 0;
    const max = u.scales.x.max ?? 0;
    const stepsPerPx = (max - min) / Math.max(1, u.bbox.width / (devicePixelRatio || 1));
    const near = markersNear(markers, u.posToVal(left, 'x'), MARKER_HOVER_PX * stepsPerPx);
    setText(elements.marker, near.map((m) => `${markerStyle(m.kind).glyph} ${m.label} (step ${formatStep(m.x)})`).join(' · '));
  }
}

/** Writes only a changed text: most cursor moves stay on the same step, and an unchanged write still relayouts. */
function setText(element: HTMLElement, text: string): void {
  if (element.textContent !== text) element.textContent = text;
}

/** The panel shown large over the page; Escape, the close button or a click outside closes it. */
function FullScreen({ title, onClose, children }: { title: string; onClose: () => void; children: ReactNode }): JSX.Element {
  const dialog = useRef<HTMLDivElement>(null);
  const close = useRef(onClose);
  useLayoutEffect(() => {
    close.current = onClose;
  });
  useEffect(() => {
    const previous = document.activeElement instanceof HTMLElement ? document.activeElement : null;
    dialog.current?.focus();
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== 'Escape') return;
      // Captured first, so Escape closes the overlay and does nothing else on the page behind it.
      event.stopPropagation();
      close.current();
    };
    document.addEventListener('keydown', onKey, true);
    return () => {
      document.removeEventListener('keydown', onKey, true);
      previous?.focus();
    };
  }, []);
  return (
    <div className="run-chart-overlay" onMouseDown={(event) => event.target === event.currentTarget && onClose()}>
      <div className="run-chart-overlay__dialog" role="dialog" aria-modal="true" aria-label={`${title}, full screen`} tabIndex={-1} ref={dialog}>
        <button type="button" className="run-chart__button run-chart-overlay__close" onClick={onClose} aria-label="Close full screen" title="Close (Escape)">
          ✕
        </button>
        {children}
      </div>
    </div>
  );
}
