/**
 * The last resort behind the HTTP server's error boundary: a rejection nobody awaited or an exception thrown from a
 * callback is logged, and the peer keeps serving. Without it one such bug — reachable from one request — exits the
 * process with code 1 and takes every running episode, training step and agent script down with it. The peer's
 * entry points install it once (cli/node-command.ts, or the runtime at start).
 */
import type { Logger } from '../log.ts';

export interface ProcessGuard {
  /** Rejections and exceptions caught so far. */
  readonly caught: number;
  /** Removes the handlers (tests; a process that installs its own). */
  uninstall(): void;
}

let installed: ProcessGuard | undefined;

/** Installs the handlers once per process; later calls return the same guard. */
export function installProcessGuard(log: Logger): ProcessGuard {
  if (installed) return installed;
  let caught = 0;
  const onRejection = (reason: unknown) => {
    caught++;
    log.error('unhandled promise rejection (a bug); the peer keeps serving', { error: describe(reason) });
  };
  const onException = (err: unknown) => {
    caught++;
    log.error('uncaught exception (a bug); the peer keeps serving', { error: describe(err) });
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  const guard: ProcessGuard = {
    get caught() {
      return caught;
    },
    uninstall() {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
      if (installed === guard) installed = undefined;
    },
  };
  installed = guard;
  return guard;
}

function describe(value: unknown): string {
  if (value instanceof Error) return value.stack ?? `${value.name}: ${value.message}`;
  return String(value);
}
