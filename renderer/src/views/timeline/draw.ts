/**
 * Paints the merge view on a canvas: every visible row's tokens as pixel columns written straight into an
 * ImageData buffer (cost follows the canvas width, not the token count, so 30,000 tokens stay fluid), then
 * token text, the selected call and the hovered token with the 2D API.
 */
import {
  TokenKind,
  generatedShade,
  rowExtent,
  rowsInView,
  tokenAtX,
  type LaneLayout,
  type MergeLayout,
  type ViewRow,
  type Viewport,
} from '../../store/timeline/layout.ts';
import { mix, packRgba, type Palette } from './palette.ts';

export interface DrawInput {
  layout: MergeLayout;
  viewport: Viewport;
  /** CSS pixels. */
  width: number;
  height: number;
  /** How far the rows are scrolled vertically (CSS px). */
  scrollTop: number;
  dpr: number;
  palette: Palette;
  selectedCallId: string | null;
  hover: { rowIndex: number; position: number } | null;
}

/** Token texts are printed once a token is this wide (CSS px). */
const TEXT_MIN_PX = 26;
/** Gaps between tokens are drawn once a token is this wide (device px). */
const GAP_MIN_PX = 4;
const ROW_INSET = 3;

export function drawMergeView(ctx: CanvasRenderingContext2D, input: DrawInput): void {
  const { layout, viewport, width, height, scrollTop, dpr, palette } = input;
  const deviceWidth = Math.max(1, Math.round(width * dpr));
  const deviceHeight = Math.max(1, Math.round(height * dpr));
  const image = ctx.createImageData(deviceWidth, deviceHeight);
  const pixels = new Uint32Array(image.data.buffer);
  pixels.fill(packRgba(palette.background));

  const rows = rowsInView(layout, scrollTop, height);
  const deviceView: Viewport = { firstToken: viewport.firstToken, pxPerToken: viewport.pxPerToken * dpr };
  const laneColumns = new Map<number, Uint32Array>();
  const line = new Uint32Array(deviceWidth);
  const colours = columnColours(palette);

  for (const row of rows) {
    let columns = laneColumns.get(row.laneIndex);
    if (!columns) {
      columns = laneColumnColours(layout.lanes[row.laneIndex], deviceView, deviceWidth, colours);
      laneColumns.set(row.laneIndex, columns);
    }
    rowLine(layout, row, columns, deviceView, line, colours);
    const top = Math.round((row.top - scrollTop + ROW_INSET) * dpr);
    const bottom = Math.round((row.top - scrollTop + row.height - ROW_INSET) * dpr);
    for (let y = Math.max(0, top); y < Math.min(deviceHeight, bottom); y++) pixels.set(line, y * deviceWidth);
  }
  ctx.putImageData(image, 0, 0);

  ctx.save();
  ctx.scale(dpr, dpr);
  if (viewport.pxPerToken >= TEXT_MIN_PX) drawTokenTexts(ctx, input, rows);
  drawSelection(ctx, input, rows);
  drawHover(ctx, input);
  ctx.restore();
}

interface ColumnColours {
  background: number;
  prompt: number;
  environment: number;
  reused: number;
  /** The generated colour at 16 shades of confidence, faint to full. */
  generated: Uint32Array;
}

const SHADES = 16;

function columnColours(palette: Palette): ColumnColours {
  const generated = new Uint32Array(SHADES);
  for (let i = 0; i < SHADES; i++)
    generated[i] = packRgba(mix(palette.generated, palette.background, (i + 1) / SHADES));
  return {
    background: packRgba(palette.background),
    prompt: packRgba(palette.prompt),
    environment: packRgba(palette.environment),
    reused: packRgba(palette.reused),
    generated,
  };
}

function shadeIndex(logprob: number): number {
  return Math.min(SHADES - 1, Math.floor(generatedShade(logprob) * SHADES));
}

/**
 * One colour per device-pixel column of a lane's merged sequence. A column covering several tokens takes the kind
 * most of them have (generated wins ties, so a short generation never vanishes when zoomed out).
 */
function laneColumnColours(
  lane: LaneLayout,
  view: Viewport,
  deviceWidth: number,
  colours: ColumnColours,
): Uint32Array {
  const columns = new Uint32Array(deviceWidth).fill(colours.background);
  const length = lane.kinds.length;
  const gaps = view.pxPerToken >= GAP_MIN_PX;
  for (let x = 0; x < deviceWidth; x++) {
    const from = view.firstToken + x / view.pxPerToken;
    const to = view.firstToken + (x + 1) / view.pxPerToken;
    const first = Math.floor(from);
    if (first >= length) break;
    const last = Math.min(length - 1, Math.max(first, Math.ceil(to) - 1));
    if (gaps && first !== Math.floor(view.firstToken + (x - 1) / view.pxPerToken)) continue; // leave the gap
    let generated = 0;
    let environment = 0;
    let probability = 0;
    for (let t = first; t <= last; t++) {
      const kind = lane.kinds[t];
      if (kind === TokenKind.generated) {
        generated++;
        probability += lane.logprobs[t];
      } else if (kind === TokenKind.environment) environment++;
    }
    const count = last - first + 1;
    const prompt = count - generated - environment;
    if (generated > 0 && generated >= environment && generated >= prompt)
      columns[x] = colours.generated[shadeIndex(probability / generated)];
    else columns[x] = environment >= prompt ? colours.environment : colours.prompt;
  }
  return columns;
}

/** A row's line of pixels: the lane's columns, with a call's reused prefix faded and everything past it blank. */
function rowLine(
  layout: MergeLayout,
  row: ViewRow,
  laneColumns: Uint32Array,
  view: Viewport,
  line: Uint32Array,
  colours: ColumnColours,
): void {
  const extent = rowExtent(layout, row);
  const reusedEnd = row.type === 'call' ? row.call.promptStart : 0;
  for (let x = 0; x < line.length; x++) {
    const token = view.firstToken + x / view.pxPerToken;
    if (token >= extent) line[x] = colours.background;
    else if (token < reusedEnd)
      line[x] = laneColumns[x] === colours.background ? colours.background : colours.reused;
    else line[x] = laneColumns[x];
  }
}

function drawTokenTexts(
  ctx: CanvasRenderingContext2D,
  { layout, viewport, width, scrollTop, palette }: DrawInput,
  rows: ViewRow[],
): void {
  ctx.font = '11px ui-monospace, Menlo, Consolas, monospace';
  ctx.textBaseline = 'middle';
  const first = Math.max(0, Math.floor(viewport.firstToken));
  const last = tokenAtX(viewport, width);
  for (const row of rows) {
    const lane = layout.lanes[row.laneIndex];
    const extent = rowExtent(layout, row);
    const y = row.top - scrollTop + row.height / 2;
    for (let t = first; t <= Math.min(last, extent - 1); t++) {
      const reused = row.type === 'call' && t < row.call.promptStart;
      ctx.fillStyle = lane.kinds[t] === TokenKind.generated && !reused ? '#ffffff' : palette.css.text;
      const x = (t - viewport.firstToken) * viewport.pxPerToken + 3;
      const text = visibleText(lane.timeline.tokenTexts[t] ?? '');
      ctx.fillText(text, x, y, viewport.pxPerToken - 6);
    }
  }
}

/** Whitespace and control characters made visible (a token of spaces must not look empty). */
export function visibleText(text: string): string {
  return text
    .replace(/\n/g, '↵')
    .replace(/\t/g, '⇥')
    .replace(/ /g, '·')
    .replace(/Ġ/g, '·')
    .replace(/Ċ/g, '↵');
}

function drawSelection(
  ctx: CanvasRenderingContext2D,
  { width, scrollTop, palette, selectedCallId }: DrawInput,
  rows: ViewRow[],
): void {
  if (!selectedCallId) return;
  const row = rows.find((r) => r.type === 'call' && r.call.callId === selectedCallId);
  if (!row) return;
  ctx.strokeStyle = palette.css.focus;
  ctx.lineWidth = 2;
  ctx.strokeRect(1, row.top - scrollTop + 1, width - 2, row.height - 2);
}

function drawHover(
  ctx: CanvasRenderingContext2D,
  { layout, viewport, scrollTop, palette, hover }: DrawInput,
): void {
  if (!hover) return;
  const row = layout.rows[hover.rowIndex];
  if (!row) return;
  const x = (hover.position - viewport.firstToken) * viewport.pxPerToken;
  const w = Math.max(2, viewport.pxPerToken);
  ctx.strokeStyle = palette.css.text;
  ctx.lineWidth = 1.5;
  ctx.strokeRect(x, row.top - scrollTop + 1, w, row.height - 2);
}
