/**
 * How a run's facts read as text, shared by `agentjet runs …` and the run report: rates, rewards, durations, the
 * start point, and the resolved configuration as dot paths with the keys changed from the defaults marked.
 */
import type { RunDetail, RunEvalPoint, RunStart, RunSummary } from '../../common/runs-api.ts';
import { flattenConfig } from '../../common/config-paths.ts';

export const NONE = '-';

export const pct = (x: number | null | undefined): string => (x === null || x === undefined || !Number.isFinite(x) ? NONE : `${(x * 100).toFixed(1)}%`);

/** A reward (or any mean) to 3 decimals. */
export const num3 = (x: number | null | undefined): string => (x === null || x === undefined || !Number.isFinite(x) ? NONE : x.toFixed(3));

export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** Created → ended, or → `now` for a run still going. */
export function runDuration(run: Pick<RunSummary, 'createdAt' | 'endedAt'>, now: Date = new Date()): string {
  const end = run.endedAt ? Date.parse(run.endedAt) : now.getTime();
  const ms = end - Date.parse(run.createdAt);
  return Number.isFinite(ms) ? formatSeconds(ms / 1000) : NONE;
}

export function startText(start: RunStart): string {
  if (start.kind === 'source') return `fresh from ${start.source}`;
  return `continued from run ${start.parentId} (${start.checkpointStep === null ? 'no checkpoint yet' : `its checkpoint of step ${start.checkpointStep}`}), source ${start.source}`;
}

export function evalText(point: RunEvalPoint | null): string {
  if (!point) return NONE;
  return `${pct(point.successRate)} of ${point.episodes} at step ${point.step}`;
}

export function valueText(value: unknown): string {
  return value === undefined ? NONE : JSON.stringify(value);
}

export interface ConfigRow {
  key: string;
  value: string;
  changed: boolean;
}

/** The full resolved configuration as dot paths, sorted, each marked when it differs from the model's defaults. */
export function configRows(detail: Pick<RunDetail, 'config' | 'changedFromDefaults'>): ConfigRow[] {
  const changed = new Set(detail.changedFromDefaults);
  return [...flattenConfig(detail.config)]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, value]) => ({ key, value: valueText(value), changed: changed.has(key) }));
}

/** Columns padded to their widest cell, two spaces apart (the last one not padded). */
export function textTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max([...h].length, ...rows.map((r) => [...(r[i] ?? '')].length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c + ' '.repeat(widths[i] - [...c].length)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** A Markdown table; pipes and line breaks inside cells are escaped so a value cannot break the table. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const cell = (c: string) => c.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
  return [`| ${header.map(cell).join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.map(cell).join(' | ')} |`)].join('\n');
}
