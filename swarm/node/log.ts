/**
 * Structured logs: one JSON object per line in <dataDir>/logs/peer.log, a short human line on stderr,
 * and every entry handed to listeners (the control API's WebSocket forwards them to the UI).
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const levelRank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface LogEntry {
  level: LogLevel;
  msg: string;
  time: string;
  [field: string]: unknown;
}

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
  onEntry(listener: (entry: LogEntry) => void): () => void;
}

export interface LoggerOptions {
  dir?: string;
  /** Minimum level printed on stderr (the file gets everything from debug up). */
  consoleLevel?: LogLevel | 'silent';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const listeners = new Set<(entry: LogEntry) => void>();
  let file: string | undefined;
  if (options.dir) {
    mkdirSync(options.dir, { recursive: true });
    file = join(options.dir, 'peer.log');
  }
  const consoleLevel = options.consoleLevel ?? 'info';

  function write(level: LogLevel, msg: string, fields: Record<string, unknown>) {
    const entry: LogEntry = { time: new Date().toISOString(), level, msg, ...fields };
    if (file) appendFileSync(file, JSON.stringify(entry) + '\n');
    if (consoleLevel !== 'silent' && levelRank[level] >= levelRank[consoleLevel]) {
      const extra = Object.entries(fields)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join(' ');
      process.stderr.write(`[${level}] ${msg}${extra ? ' ' + extra : ''}\n`);
    }
    for (const listener of listeners) listener(entry);
  }

  function make(base: Record<string, unknown>): Logger {
    return {
      debug: (msg, f = {}) => write('debug', msg, { ...base, ...f }),
      info: (msg, f = {}) => write('info', msg, { ...base, ...f }),
      warn: (msg, f = {}) => write('warn', msg, { ...base, ...f }),
      error: (msg, f = {}) => write('error', msg, { ...base, ...f }),
      child: (fields) => make({ ...base, ...fields }),
      onEntry: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
  }
  return make({});
}
