/**
 * Line charts as standalone SVG, for run reports that open anywhere (a browser, a Markdown viewer, a PR).
 * One chart = one y axis and several named series over a shared x (usually the training step).
 */

export interface Series {
  name: string;
  points: { x: number; y: number }[];
  /** Optional band (e.g. mean ± std) drawn under the line. */
  band?: { x: number; low: number; high: number }[];
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
  /** Fix the y range (e.g. [0, 1] for rates); otherwise it is fitted to the data. */
  yDomain?: [number, number];
}

const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2'];
const MARGIN = { top: 36, right: 16, bottom: 44, left: 60 };

export function lineChartSvg(series: Series[], options: ChartOptions): string {
  const width = options.width ?? 560;
  const height = options.height ?? 300;
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const all = series.flatMap((s) => s.points);
  const bandValues = series.flatMap((s) => s.band ?? []).flatMap((b) => [b.low, b.high]);
  const finite = (v: number) => Number.isFinite(v);

  const xs = all.map((p) => p.x).filter(finite);
  const ys = [...all.map((p) => p.y), ...bandValues].filter(finite);
  const [x0, x1] = xs.length ? niceRange(Math.min(...xs), Math.max(...xs)) : [0, 1];
  const [y0, y1] = options.yDomain ?? (ys.length ? niceRange(Math.min(...ys), Math.max(...ys)) : [0, 1]);
  const sx = (x: number) => MARGIN.left + ((x - x0) / (x1 - x0 || 1)) * plotW;
  const sy = (y: number) => MARGIN.top + plotH - ((y - y0) / (y1 - y0 || 1)) * plotH;

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${MARGIN.left}" y="20" font-size="14" font-weight="600" fill="#111827">${escapeXml(options.title)}</text>`,
  );
  for (const t of ticks(y0, y1, 5)) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${sy(t)}" y2="${sy(t)}" stroke="#e5e7eb"/>`,
      `<text x="${MARGIN.left - 6}" y="${sy(t) + 4}" text-anchor="end" fill="#4b5563">${formatTick(t)}</text>`,
    );
  }
  for (const t of ticks(x0, x1, 6)) {
    parts.push(`<text x="${sx(t)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle" fill="#4b5563">${formatTick(t)}</text>`);
  }
  parts.push(
    `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${MARGIN.top + plotH}" y2="${MARGIN.top + plotH}" stroke="#9ca3af"/>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${height - 8}" text-anchor="middle" fill="#374151">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(14 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle" fill="#374151">${escapeXml(options.yLabel)}</text>`,
  );

  series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    const band = (s.band ?? []).filter((b) => finite(b.low) && finite(b.high));
    if (band.length > 1) {
      const upper = band.map((b) => `${sx(b.x)},${sy(b.high)}`);
      const lower = [...band].reverse().map((b) => `${sx(b.x)},${sy(b.low)}`);
      parts.push(`<polygon points="${[...upper, ...lower].join(' ')}" fill="${color}" fill-opacity="0.15"/>`);
    }
    const pts = s.points.filter((p) => finite(p.x) && finite(p.y));
    if (pts.length > 1) {
      parts.push(
        `<polyline points="${pts.map((p) => `${sx(p.x)},${sy(p.y)}`).join(' ')}" fill="none" stroke="${color}" stroke-width="2"/>`,
      );
    }
    for (const p of pts.length <= 60 ? pts : []) parts.push(`<circle cx="${sx(p.x)}" cy="${sy(p.y)}" r="2.5" fill="${color}"/>`);
    const legendX = MARGIN.left + plotW - 140;
    const legendY = MARGIN.top + 4 + i * 16;
    parts.push(
      `<rect x="${legendX}" y="${legendY}" width="10" height="10" fill="${color}"/>`,
      `<text x="${legendX + 14}" y="${legendY + 9}" fill="#111827">${escapeXml(s.name)}</text>`,
    );
  });
  parts.push('</svg>');
  return parts.join('\n');
}

function niceRange(min: number, max: number): [number, number] {
  if (min === max) return [min - 1, max + 1];
  const pad = (max - min) * 0.05;
  return [min - pad, max + pad];
}

function ticks(min: number, max: number, count: number): number[] {
  const span = max - min;
  if (!(span > 0)) return [min];
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let t = Math.ceil(min / step) * step; t <= max + 1e-12; t += step) out.push(Number(t.toPrecision(12)));
  return out;
}

function formatTick(v: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(1);
  return Number(v.toPrecision(3)).toString();
}

export function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);
}
