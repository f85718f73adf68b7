/**
 * Saving a panel as a file: PNG from uPlot's canvas (with the title and a legend drawn above and below it) and
 * SVG from chart-export.ts. Both go through the app's download helper (api/download.ts).
 */
import type uPlot from 'uplot';
import { saveDownload } from '../../api/download.ts';
import { chartFileName } from './chart-export.ts';

/** Space for the title above the plot and each legend row below it, in CSS px. */
const PNG_TITLE_PX = 28;
const PNG_LEGEND_ROW_PX = 18;
const PNG_PAD_PX = 12;
const PNG_FONT = 'system-ui, sans-serif';

export interface PngLegendEntry {
  label: string;
  colour: string;
}

export interface PngTheme {
  background: string;
  text: string;
}

/** Saves the plot as PNG: title, then the canvas as drawn (zoom and smoothing included), then the legend. */
export async function downloadPng(u: uPlot, title: string, legend: readonly PngLegendEntry[], theme: PngTheme): Promise<void> {
  const source = u.ctx.canvas;
  const ratio = source.width / Math.max(1, source.clientWidth || source.width);
  const rows = legendRows(legend, source.width / ratio - 2 * PNG_PAD_PX);
  const canvas = document.createElement('canvas');
  canvas.width = source.width;
  canvas.height = source.height + Math.ceil((PNG_TITLE_PX + rows.length * PNG_LEGEND_ROW_PX + PNG_PAD_PX) * ratio);
  const ctx = canvas.getContext('2d');
  if (!ctx) return;
  ctx.scale(ratio, ratio);
  ctx.fillStyle = theme.background;
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = theme.text;
  ctx.font = `600 13px ${PNG_FONT}`;
  ctx.textBaseline = 'middle';
  ctx.fillText(title, PNG_PAD_PX, PNG_TITLE_PX / 2, source.width / ratio - 2 * PNG_PAD_PX);
  ctx.drawImage(source, 0, PNG_TITLE_PX, source.width / ratio, source.height / ratio);
  ctx.font = `11px ${PNG_FONT}`;
  rows.forEach((row, r) => {
    const y = PNG_TITLE_PX + source.height / ratio + PNG_LEGEND_ROW_PX * (r + 0.5) + 4;
    for (const item of row) {
      ctx.fillStyle = item.colour;
      ctx.fillRect(item.x, y - 5, 10, 10);
      ctx.fillStyle = theme.text;
      ctx.fillText(item.label, item.x + 14, y);
    }
  });
  const blob = await new Promise<Blob | null>((resolve) => canvas.toBlob(resolve, 'image/png'));
  if (blob) await saveDownload(new Response(blob), chartFileName(title, 'png'));
}

export async function downloadSvg(svg: string, title: string): Promise<void> {
  await saveDownload(new Response(new Blob([svg], { type: 'image/svg+xml' })), chartFileName(title, 'svg'));
}

/** Legend entries flowed into rows of `width` CSS px, with an estimated text width. */
function legendRows(legend: readonly PngLegendEntry[], width: number): (PngLegendEntry & { x: number })[][] {
  const rows: (PngLegendEntry & { x: number })[][] = [[]];
  let x = PNG_PAD_PX;
  for (const entry of legend) {
    const w = 14 + entry.label.length * 6.5 + 16;
    if (x > PNG_PAD_PX && x + w > width + PNG_PAD_PX) {
      rows.push([]);
      x = PNG_PAD_PX;
    }
    rows[rows.length - 1].push({ ...entry, x });
    x += w;
  }
  return rows.filter((row) => row.length > 0);
}
