/**
 * A one-line progress bar for long CLI work. On a terminal it redraws in place; elsewhere (CI logs, pipes) it
 * prints a plain line at most every `plainIntervalMs`, so logs stay readable. It writes to stderr, leaving
 * stdout for results (e.g. a --json line).
 */

export interface ProgressOptions {
  total: number;
  label: string;
  stream?: NodeJS.WriteStream;
  plainIntervalMs?: number;
}

export class ProgressBar {
  private readonly stream: NodeJS.WriteStream;
  private readonly startedAt = Date.now();
  private lastPlainAt = 0;
  private current = 0;
  private fields: Record<string, string> = {};

  constructor(private readonly options: ProgressOptions) {
    this.stream = options.stream ?? process.stderr;
  }

  update(current: number, fields: Record<string, string | number> = {}): void {
    this.current = current;
    this.fields = Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, typeof v === 'number' ? formatNumber(v) : v]));
    this.render(false);
  }

  done(fields: Record<string, string | number> = {}): void {
    this.update(this.options.total, fields);
    this.render(true);
    if (this.stream.isTTY) this.stream.write('\n');
  }

  line(): string {
    const { total, label } = this.options;
    const fraction = total > 0 ? Math.min(1, this.current / total) : 0;
    const width = 24;
    const filled = Math.round(fraction * width);
    const bar = '█'.repeat(filled) + '░'.repeat(width - filled);
    const elapsedS = (Date.now() - this.startedAt) / 1000;
    const etaS = fraction > 0 && fraction < 1 ? (elapsedS / fraction) * (1 - fraction) : 0;
    const extras = Object.entries(this.fields).map(([k, v]) => `${k} ${v}`);
    return [`${label} ${bar} ${this.current}/${total}`, ...extras, `elapsed ${formatDuration(elapsedS)}`, fraction < 1 ? `ETA ${formatDuration(etaS)}` : '']
      .filter(Boolean)
      .join(' · ');
  }

  private render(force: boolean) {
    if (this.stream.isTTY) {
      const columns = this.stream.columns ?? 120;
      this.stream.write(`\r${this.line().slice(0, columns - 1).padEnd(columns - 1)}`);
      return;
    }
    const now = Date.now();
    if (force || now - this.lastPlainAt >= (this.options.plainIntervalMs ?? 5000)) {
      this.lastPlainAt = now;
      this.stream.write(this.line() + '\n');
    }
  }
}

export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const m = Math.floor(s / 60);
  return m > 0 ? `${m}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

function formatNumber(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(3);
}
