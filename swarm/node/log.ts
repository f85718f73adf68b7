/**
 * Structured logs: one JSON object per line in <dataDir>/logs/peer.log, a short human line on stderr,
 * and every entry handed to listeners (the control API's WebSocket forwards them to the UI).
 * Logging never throws: it runs inside error handlers, and a full disk must not turn one failed request into a
 * dead peer. A line the file cannot take is dropped and counted (`dropped`); the next line tries again.
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
  /** Lines the log file could not take (disk full, file not writable), shared by a logger and its children. */
  readonly dropped: number;
}

export interface LoggerOptions {
  /** Lines go to `<dir>/peer.log`. */
  dir?: string;
  /** Or to this file (tests point it at paths that cannot be written). */
  file?: string;
  /** Minimum level printed on stderr (the file gets everything from debug up). */
  consoleLevel?: LogLevel | 'silent';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const listeners = new Set<(entry: LogEntry) => void>();
  let file: string | undefined;
  if (options.dir) {
    file = join(options.dir, 'peer.log');
    try {
      mkdirSync(options.dir, { recursive: true });
    } catch {
      // A folder that cannot be made (a full disk) shows up as dropped lines and one notice, not a failed start.
    }
  } else if (options.file) {
    file = options.file;
  }
  const consoleLevel = options.consoleLevel ?? 'info';
  let dropped = 0;
  /** Set while the file refuses lines, so stderr hears about it once per outage, not once per line. */
  let failing = false;

  function appendLine(path: string, line: string) {
    try {
      appendFileSync(path, line);
      if (failing) {
        failing = false;
        printConsole(`[warn] ${path} takes lines again; ${dropped} were dropped\n`);
      }
    } catch (err) {
      dropped++;
      if (!failing) {
        failing = true;
        const code = (err as NodeJS.ErrnoException).code ?? String(err);
        printConsole(`[error] cannot write ${path} (${code}); dropping log lines until it can be written again\n`);
      }
    }
  }

  function write(level: LogLevel, msg: string, fields: Record<string, unknown>) {
    const entry: LogEntry = { time: new Date().toISOString(), level, msg, ...fields };
    if (file) appendLine(file, serialize(entry) + '\n');
    if (consoleLevel !== 'silent' && levelRank[level] >= levelRank[consoleLevel]) {
      const extra = Object.entries(fields)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : safeStringify(v)}`)
        .join(' ');
      printConsole(`[${level}] ${msg}${extra ? ' ' + extra : ''}\n`);
    }
    for (const listener of listeners) {
      try {
        listener(entry);
      } catch {
        // A listener's failure (a closed socket) is its own business; the other listeners still get the entry.
      }
    }
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
      get dropped() {
        return dropped;
      },
    };
  }
  return make({});
}

/** stderr can be gone (a closed pipe from a parent that exited); that must not stop the peer either. */
function printConsole(text: string) {
  try {
    process.stderr.write(text);
  } catch {
    // Nowhere left to say it.
  }
}

/** Fields are the caller's values: a cycle or a BigInt must not make logging throw. */
function serialize(entry: LogEntry): string {
  try {
    return JSON.stringify(entry);
  } catch (err) {
    return JSON.stringify({ time: entry.time, level: entry.level, msg: entry.msg, unserializable: String(err) });
  }
}

function safeStringify(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
