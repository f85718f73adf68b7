/**
 * Line charts as standalone SVG, for run reports that open anywhere (a browser, a Markdown viewer, a PR) and for
 * the app's "Download SVG". One chart = one y axis and several named series over a shared x (the training step).
 * Layout, top to bottom: the title (wrapped, shrunk if need be, never cut), event labels, the plot, the x axis,
 * the legend. Nothing but the series, bands and labelled point markers is drawn over the plot area.
 * Pure: no DOM, no Node APIs.
 */
import { integerTicks, integerXRange, niceTicks, niceYRange } from './axis.ts';
import { formatStep, tickLabels, type ChartFormat } from './format.ts';

export interface Series {
  name: string;
  points: { x: number; y: number }[];
  /** Optional band (e.g. mean ± std) drawn under the line. */
  band?: { x: number; low: number; high: number }[];
  /** Any SVG colour; by default the palette's colour for the series' place. */
  colour?: string;
  dashed?: boolean;
  /** Line opacity 0..1 (e.g. the raw line faint behind its smoothed twin). */
  opacity?: number;
  /** false: left out of the legend (a faint twin of a series that is in it). */
  legend?: boolean;
}

/** A labelled dot at one point, e.g. "held-out before". */
export interface PointMarker {
  x: number;
  y: number;
  label: string;
  colour?: string;
}

/** A vertical line at one step, e.g. a checkpoint or a hot swap. */
export interface EventMarker {
  x: number;
  label: string;
  colour?: string;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  /** The height of the plot with its axes; the title and legend add to it as they need. */
  height?: number;
  /** Fix the y range (e.g. [0, 1] for rates); otherwise it is fitted to the data. */
  yDomain?: [number, number];
  format?: ChartFormat;
  markers?: readonly PointMarker[];
  /** Vertical lines at steps within the data's range (others are left out). */
  events?: readonly EventMarker[];
  background?: string;
}

export const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#4b5563'];

const DEFAULT_WIDTH = 560;
const DEFAULT_HEIGHT = 300;
/** Blank border around everything. */
const EDGE = 12;
/** Space under the plot for the x tick labels and the x label. */
const X_AXIS_BLOCK = 40;
/** Room right of the plot so the last x tick label is not cut. */
const RIGHT_ROOM = 16;
/** Title fonts tried in turn, each with the most lines it may take; the last one takes as many as it needs. */
const TITLE_FITS: readonly { size: number; maxLines: number }[] = [
  { size: 14, maxLines: 2 },
  { size: 12, maxLines: 3 },
];
const LINE_HEIGHT = 1.3;
/** Between the title's last line and what follows (event labels or the top y tick label). */
const TITLE_GAP = 14;
/** A series of one point (an eval before/after) gets a dot this big; denser series get small ones. */
const LONE_POINT_RADIUS = 4;
const POINT_RADIUS = 2.5;
/** An average glyph width as a share of the font size, on the wide side so estimated text is never too short. */
const CHAR_WIDTH_EM = 0.6;
const TICK_FONT = 11;
const EVENT_FONT = 10;
const LEGEND_ROW = 18;
const LEGEND_SWATCH = 12;
const LEGEND_GAP = 18;
/** Series up to this many points show their points as dots. */
const MAX_DOTTED_POINTS = 60;

/** The width `text` takes at `fontSize`, estimated (SVG has no text metrics without a renderer). */
export function estimateTextWidth(text: string, fontSize: number): number {
  return [...text].length * fontSize * CHAR_WIDTH_EM;
}

/** `text` broken at spaces into lines no wider than `maxWidth`; a word longer than a line is split. */
export function wrapText(text: string, maxWidth: number, fontSize: number): string[] {
  const perLine = Math.max(1, Math.floor(maxWidth / (fontSize * CHAR_WIDTH_EM)));
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const chars = [...word];
    for (let start = 0; start < chars.length; start += perLine) {
      const piece = chars.slice(start, start + perLine).join('');
      const candidate = line ? `${line} ${piece}` : piece;
      if ([...candidate].length <= perLine) line = candidate;
      else {
        lines.push(line);
        line = piece;
      }
    }
  }
  if (line) lines.push(line);
  return lines.length ? lines : [''];
}

function fitTitle(title: string, maxWidth: number): { size: number; lines: string[] } {
  for (const fit of TITLE_FITS) {
    const lines = wrapText(title, maxWidth, fit.size);
    if (lines.length <= fit.maxLines) return { size: fit.size, lines };
  }
  const size = TITLE_FITS[TITLE_FITS.length - 1].size;
  return { size, lines: wrapText(title, maxWidth, size) };
}

export function lineChartSvg(series: Series[], options: ChartOptions): string {
  const width = options.width ?? DEFAULT_WIDTH;
  const plotBlock = options.height ?? DEFAULT_HEIGHT;
  const format = options.format ?? 'number';
  const finite = (v: number) => Number.isFinite(v);
  const markers = (options.markers ?? []).filter((m) => finite(m.x) && finite(m.y));
  const allEvents = (options.events ?? []).filter((e) => finite(e.x));

  // Ranges from everything drawn.
  const all = series.flatMap((s) => s.points).filter((p) => finite(p.x) && finite(p.y));
  const bandValues = series.flatMap((s) => s.band ?? []).flatMap((b) => [b.low, b.high]).filter(finite);
  // Events do not widen the x range: a marker past the last step would squash every line into a corner.
  const xs = [...all.map((p) => p.x), ...markers.map((m) => m.x)];
  const ys = [...all.map((p) => p.y), ...bandValues, ...markers.map((m) => m.y)];
  const [x0, x1] = integerXRange(xs.length ? Math.min(...xs) : null, xs.length ? Math.max(...xs) : null);
  const [y0, y1] = niceYRange(ys.length ? Math.min(...ys) : null, ys.length ? Math.max(...ys) : null, {
    format,
    domain: options.yDomain,
  });
  const events = allEvents.filter((e) => e.x >= x0 && e.x <= x1);
  const yTicks = niceTicks(y0, y1);
  const yLabels = tickLabels(yTicks, format);

  // Layout, top to bottom.
  const title = fitTitle(options.title, width - 2 * EDGE);
  const titleLineHeight = title.size * LINE_HEIGHT;
  const titleBottom = EDGE + title.lines.length * titleLineHeight;
  const left = EDGE + 14 + Math.max(24, ...yLabels.map((l) => estimateTextWidth(l, TICK_FONT))) + 6;
  const plotW = Math.max(40, width - left - RIGHT_ROOM);
  const sx = (x: number) => left + ((x - x0) / (x1 - x0 || 1)) * plotW;
  const eventRows = layoutEventLabels(events, sx, width - EDGE);
  const eventBlock = eventRows.rowCount * (EVENT_FONT + 4);
  const plotTop = titleBottom + TITLE_GAP + eventBlock;
  const plotH = Math.max(40, plotBlock - X_AXIS_BLOCK - 24);
  const plotBottom = plotTop + plotH;
  const sy = (y: number) => plotTop + plotH - ((y - y0) / (y1 - y0 || 1)) * plotH;
  // A band never reaches past the y axis (an explicit domain bounds it); lines beyond it are clipped instead.
  const syBand = (y: number) => sy(clamp(y, y0, y1));
  const colourOf = (s: Series, i: number) => s.colour ?? PALETTE[i % PALETTE.length];
  const legend = layoutLegend(
    series.map((s, i) => ({ name: s.name, colour: colourOf(s, i), dashed: s.dashed, show: s.legend !== false })),
    width - 2 * EDGE,
    plotBottom + X_AXIS_BLOCK + 4,
  );
  const height = Math.ceil(legend.bottom + EDGE);
  const clipId = `plot-clip-${hash(`${options.title}|${width}|${plotBlock}`)}`;

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="${TICK_FONT}">`,
    `<rect width="${width}" height="${height}" fill="${escapeXml(options.background ?? '#ffffff')}"/>`,
    `<defs><clipPath id="${clipId}"><rect x="${r(left)}" y="${r(plotTop)}" width="${r(plotW)}" height="${r(plotH)}"/></clipPath></defs>`,
    `<text data-role="title" x="${EDGE}" y="${r(EDGE + title.size)}" font-size="${title.size}" font-weight="600" fill="#111827">${title.lines
      .map((line, i) => `<tspan x="${EDGE}" dy="${i === 0 ? 0 : r(titleLineHeight)}">${escapeXml(line)}</tspan>`)
      .join('')}</text>`,
    `<rect data-role="plot-area" x="${r(left)}" y="${r(plotTop)}" width="${r(plotW)}" height="${r(plotH)}" fill="none"/>`,
  );
  yTicks.forEach((t, i) => {
    parts.push(
      `<line x1="${r(left)}" x2="${r(left + plotW)}" y1="${r(sy(t))}" y2="${r(sy(t))}" stroke="#e5e7eb"/>`,
      `<text x="${r(left - 6)}" y="${r(sy(t) + 4)}" text-anchor="end" fill="#4b5563">${escapeXml(yLabels[i])}</text>`,
    );
  });
  for (const t of integerTicks(x0, x1)) {
    parts.push(`<text x="${r(sx(t))}" y="${r(plotBottom + 16)}" text-anchor="middle" fill="#4b5563">${escapeXml(formatStep(t))}</text>`);
  }
  parts.push(
    `<line x1="${r(left)}" x2="${r(left + plotW)}" y1="${r(plotBottom)}" y2="${r(plotBottom)}" stroke="#9ca3af"/>`,
    `<text x="${r(left + plotW / 2)}" y="${r(plotBottom + 34)}" text-anchor="middle" fill="#374151">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(${EDGE + 4} ${r(plotTop + plotH / 2)}) rotate(-90)" text-anchor="middle" fill="#374151">${escapeXml(options.yLabel)}</text>`,
  );

  // Event markers: a dashed line through the plot, the label above it (outside the plot).
  events.forEach((e, i) => {
    const x = sx(e.x);
    const colour = e.colour ?? '#6b7280';
    const labelY = titleBottom + TITLE_GAP + (eventRows.rows[i] + 1) * (EVENT_FONT + 4) - 4;
    parts.push(
      `<g data-role="event"><line x1="${r(x)}" x2="${r(x)}" y1="${r(plotTop)}" y2="${r(plotBottom)}" stroke="${escapeXml(colour)}" stroke-dasharray="3 3"/>` +
        `<text x="${r(x)}" y="${r(labelY)}" font-size="${EVENT_FONT}" text-anchor="${eventRows.anchors[i]}" fill="${escapeXml(colour)}">${escapeXml(e.label)}</text></g>`,
    );
  });

  parts.push(`<g clip-path="url(#${clipId})">`);
  series.forEach((s, i) => {
    const colour = escapeXml(colourOf(s, i));
    const opacity = s.opacity !== undefined ? ` stroke-opacity="${s.opacity}"` : '';
    const band = (s.band ?? []).filter((b) => finite(b.x) && finite(b.low) && finite(b.high));
    if (band.length > 1) {
      const upper = band.map((b) => `${r(sx(b.x))},${r(syBand(b.high))}`);
      const lower = [...band].reverse().map((b) => `${r(sx(b.x))},${r(syBand(b.low))}`);
      parts.push(`<polygon points="${[...upper, ...lower].join(' ')}" fill="${colour}" fill-opacity="0.15"/>`);
    }
    const pts = s.points.filter((p) => finite(p.x) && finite(p.y));
    if (pts.length > 1) {
      parts.push(
        `<polyline points="${pts.map((p) => `${r(sx(p.x))},${r(sy(p.y))}`).join(' ')}" fill="none" stroke="${colour}" stroke-width="2"${opacity}${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`,
      );
    }
    if (pts.length <= MAX_DOTTED_POINTS && s.opacity === undefined) {
      const radius = pts.length === 1 ? LONE_POINT_RADIUS : POINT_RADIUS;
      for (const p of pts) parts.push(`<circle cx="${r(sx(p.x))}" cy="${r(sy(p.y))}" r="${radius}" fill="${colour}"/>`);
    }
  });
  parts.push('</g>');

  // Labelled point markers: a ringed dot with its label beside it, kept inside the chart.
  for (const m of markers) {
    const x = sx(m.x);
    const y = sy(m.y);
    const colour = escapeXml(m.colour ?? '#111827');
    const labelWidth = estimateTextWidth(m.label, TICK_FONT);
    const toLeft = x + 8 + labelWidth > width - EDGE;
    const labelY = y - 8 < plotTop + TICK_FONT ? y + 16 : y - 8;
    parts.push(
      `<g data-role="marker"><circle cx="${r(x)}" cy="${r(y)}" r="4.5" fill="${colour}" stroke="#ffffff" stroke-width="1.5"/>` +
        // A white halo (stroke painted under the fill) keeps the label readable where it crosses a line.
        `<text x="${r(toLeft ? x - 8 : x + 8)}" y="${r(labelY)}" text-anchor="${toLeft ? 'end' : 'start'}" fill="${colour}" font-weight="600" stroke="#ffffff" stroke-width="3" paint-order="stroke">${escapeXml(m.label)}</text></g>`,
    );
  }

  parts.push('<g data-role="legend">');
  for (const item of legend.items) {
    const swatch = item.dashed
      ? `<line x1="${r(item.x)}" x2="${r(item.x + LEGEND_SWATCH)}" y1="${r(item.y + 6)}" y2="${r(item.y + 6)}" stroke="${escapeXml(item.colour)}" stroke-width="2" stroke-dasharray="3 2"/>`
      : `<rect x="${r(item.x)}" y="${r(item.y)}" width="${LEGEND_SWATCH}" height="${LEGEND_SWATCH}" rx="2" fill="${escapeXml(item.colour)}"/>`;
    parts.push(
      `<g data-role="legend-item" data-y="${r(item.y)}">${swatch}<text x="${r(item.x + LEGEND_SWATCH + 4)}" y="${r(item.y + 10)}" fill="#111827">${escapeXml(item.name)}</text></g>`,
    );
  }
  parts.push('</g>', '</svg>');
  return parts.join('\n');
}

interface LegendItem {
  name: string;
  colour: string;
  dashed?: boolean;
  x: number;
  y: number;
}

/** Legend entries flowed left to right in rows below `top`; an entry wider than a row takes a row of its own. */
function layoutLegend(
  entries: { name: string; colour: string; dashed?: boolean; show: boolean }[],
  rowWidth: number,
  top: number,
): { items: LegendItem[]; bottom: number } {
  const items: LegendItem[] = [];
  let x = 0;
  let row = 0;
  for (const entry of entries.filter((e) => e.show)) {
    const w = LEGEND_SWATCH + 4 + estimateTextWidth(entry.name, TICK_FONT);
    if (x > 0 && x + w > rowWidth) {
      row++;
      x = 0;
    }
    items.push({ ...entry, x: EDGE + x, y: top + row * LEGEND_ROW });
    x += w + LEGEND_GAP;
  }
  return { items, bottom: items.length ? top + (row + 1) * LEGEND_ROW : top };
}

/** Event labels above the plot, each in the first row where it does not run into the one before. */
function layoutEventLabels(
  events: readonly EventMarker[],
  sx: (x: number) => number,
  rightEdge: number,
): { rows: number[]; anchors: ('start' | 'end')[]; rowCount: number } {
  const rowEnds: number[] = [];
  const rows: number[] = [];
  const anchors: ('start' | 'end')[] = [];
  const order = events.map((e, i) => i).sort((a, b) => events[a].x - events[b].x);
  for (const i of order) {
    const x = sx(events[i].x);
    const w = estimateTextWidth(events[i].label, EVENT_FONT);
    const anchor = x + w > rightEdge ? 'end' : 'start';
    const start = anchor === 'end' ? x - w : x;
    let row = rowEnds.findIndex((end) => end + 6 <= start);
    if (row < 0) row = rowEnds.push(0) - 1;
    rowEnds[row] = anchor === 'end' ? x : x + w;
    rows[i] = row;
    anchors[i] = anchor;
  }
  return { rows, anchors, rowCount: rowEnds.length };
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}

/** Coordinates to 0.1 px: shorter files, no visible difference. */
function r(v: number): number {
  return Math.round(v * 10) / 10;
}

/** A short stable hash, so a page holding several of these charts gets distinct clip-path ids. */
function hash(text: string): string {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return (h >>> 0).toString(36);
}

export function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);
}
