/** Shared output for benchmarks: a readable table for people, one JSON object as the last line for machines. */

export type Row = Record<string, string | number | boolean | null>;

export interface BenchContext {
  json: boolean;
  /** Extra CLI arguments after the benchmark's name. */
  args: string[];
  /** Progress lines go to stderr so that --json's last stdout line stays parseable. */
  log: (line: string) => void;
}

function formatCell(value: Row[string]): string {
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return String(value);
    return Math.abs(value) >= 100 ? value.toFixed(1) : value.toPrecision(4);
  }
  return String(value);
}

export function formatTable(rows: Row[]): string {
  if (rows.length === 0) return '(no rows)';
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cells = rows.map((r) => columns.map((c) => (c in r ? formatCell(r[c]) : '')));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (parts: string[]) => parts.map((p, i) => p.padEnd(widths[i])).join('  ');
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}
