/**
 * Event markers (start, resume, checkpoint, hot swap…): a colour and a glyph per kind, drawn in uPlot's `draw`
 * hook as thin vertical lines with the glyph at the top, and found near the cursor for the legend.
 */
import type uPlot from 'uplot';
import type { ChartMarker, ChartMarkerKind } from './chart-types.ts';

export interface MarkerStyle {
  /** A CSS variable name. */
  colour: string;
  /** One character, drawn at the top of the line and shown in the legend. */
  glyph: string;
}

const STYLES: Record<ChartMarkerKind, MarkerStyle> = {
  start: { colour: '--ok', glyph: '▶' },
  resume: { colour: '--info', glyph: '▷' },
  'config-change': { colour: '--warn', glyph: '⚙' },
  checkpoint: { colour: '--info', glyph: '◆' },
  'hot-swap': { colour: '--accent', glyph: '⇄' },
  revert: { colour: '--warn', glyph: '↶' },
  stop: { colour: '--text-muted', glyph: '■' },
  finish: { colour: '--ok', glyph: '✓' },
  fail: { colour: '--danger', glyph: '✕' },
};
const UNKNOWN_STYLE: MarkerStyle = { colour: '--text-muted', glyph: '•' };

/** How close (CSS px) the cursor must come to a marker line for the legend to name it. */
export const MARKER_HOVER_PX = 6;
const GLYPH_FONT_PX = 10;

export function markerStyle(kind: string): MarkerStyle {
  return (STYLES as Record<string, MarkerStyle>)[kind] ?? UNKNOWN_STYLE;
}

/** Markers whose step lies within `tolerance` steps of `step`, nearest first. */
export function markersNear(markers: readonly ChartMarker[], step: number, tolerance: number): ChartMarker[] {
  return markers
    .filter((m) => Math.abs(m.x - step) <= tolerance)
    .sort((a, b) => Math.abs(a.x - step) - Math.abs(b.x - step));
}

/** Draws `markers` over the plot: a 1 px line each, its glyph at the top. `resolve` turns a CSS variable into a colour. */
export function drawMarkers(u: uPlot, markers: readonly ChartMarker[], resolve: (colour: string) => string): void {
  if (markers.length === 0) return;
  const { ctx } = u;
  const { left, top, width, height } = u.bbox;
  const ratio = uPlotPixelRatio();
  const min = u.scales.x.min ?? -Infinity;
  const max = u.scales.x.max ?? Infinity;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  ctx.lineWidth = ratio;
  ctx.font = `${GLYPH_FONT_PX * ratio}px system-ui, sans-serif`;
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  for (const marker of markers) {
    if (marker.x < min || marker.x > max) continue;
    const style = markerStyle(marker.kind);
    const colour = resolve(style.colour);
    // Half-pixel aligned so a 1 px line stays crisp.
    const x = Math.round(u.valToPos(marker.x, 'x', true)) + 0.5;
    ctx.strokeStyle = colour;
    ctx.globalAlpha = 0.55;
    ctx.setLineDash([3 * ratio, 3 * ratio]);
    ctx.beginPath();
    ctx.moveTo(x, top + (GLYPH_FONT_PX + 2) * ratio);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    ctx.globalAlpha = 1;
    ctx.fillStyle = colour;
    ctx.fillText(style.glyph, x, top + ratio);
  }
  ctx.restore();
}

/** uPlot draws in device pixels: bbox and canvas coordinates are CSS px × devicePixelRatio. */
function uPlotPixelRatio(): number {
  return typeof devicePixelRatio === 'number' && devicePixelRatio > 0 ? devicePixelRatio : 1;
}
