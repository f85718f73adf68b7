/**
 * A real peer runtime in a process of its own, for the HTTP fuzz (peer.ts is the parent side). It hosts builtin
 * `tiny` on 127.0.0.1 with p2p off (so no fuzzed `/api/swarm/*` request can open a listener beyond loopback) and
 * training not started (no step moves the state under the fuzzer's feet). It counts unhandled rejections and
 * uncaught exceptions instead of dying, so the parent can both see them and keep fuzzing, and answers `snapshot`
 * over IPC with what a rejected request must not change. Started by `fork(…, [dataDir])`; stops on disconnect.
 */
import '../../../../p2p/polyfill.ts';
import { PeerRuntime } from '../../runtime.ts';
import type { ChildReady, ChildRequest, ChildSnapshot } from './peer.ts';
import { episodesByState, tableCounts } from '../../store/testing/inspect.ts';

/** Only the first few crash reasons travel back: enough to route the bug, bounded however many there are. */
const MAX_CRASH_REASONS = 16;
/** The peer's latest error log lines kept for the report, and how much of each. */
const MAX_ERROR_LINES = 8;
const MAX_ERROR_LINE_CHARS = 600;
/** Concurrent episodes the fuzzer may hold open: its pool of targets plus the per-batch liveness checks. */
const POOL_LIMIT = 64;

const crashReasons: string[] = [];
let crashes = 0;
const onCrash = (kind: string) => (reason: unknown) => {
  crashes++;
  if (crashReasons.length < MAX_CRASH_REASONS) {
    crashReasons.push(`${kind}: ${reason instanceof Error ? (reason.stack ?? `${reason.name}: ${reason.message}`) : String(reason)}`);
  }
};
process.on('unhandledRejection', onCrash('unhandledRejection'));
process.on('uncaughtException', onCrash('uncaughtException'));

const dataDir = process.argv[2];
if (!dataDir) throw new Error('usage: peer-child.ts DATA_DIR');
const runtime = await PeerRuntime.start({
  dataDir,
  host: '127.0.0.1',
  port: 0,
  consoleLogLevel: 'silent',
  models: [{ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: POOL_LIMIT }],
  training: { autoStart: false },
  p2p: { enabled: false },
});

// The peer's own error log lines (a 500's cause, an engine that died): the newest few travel with each snapshot.
const errorLines: string[] = [];
runtime.log.onEntry((entry) => {
  if (entry.level !== 'error') return;
  const { level: _level, time: _time, msg, ...fields } = entry;
  errorLines.push(`${msg} ${JSON.stringify(fields)}`.slice(0, MAX_ERROR_LINE_CHARS));
  if (errorLines.length > MAX_ERROR_LINES) errorLines.shift();
});

function snapshot(): ChildSnapshot {
  const status = runtime.status();
  const counts = tableCounts(runtime.db);
  return {
    crashes,
    crashReasons: [...crashReasons],
    errorLines: [...errorLines],
    state: {
      episodesByState: episodesByState(runtime.db),
      calls: counts.calls,
      timelines: counts.timelines,
      trainSteps: counts.train_steps,
      clientScripts: counts.client_scripts,
      clientRuns: counts.client_runs,
      clientKeys: counts.client_keys,
      activeEpisodes: runtime.serving.episodes.activeCount,
      status: {
        storeEpisodes: status.store.episodes,
        models: status.models.map((m) => ({ name: m.name, policyVersion: m.policyVersion, step: m.step, pool: m.pool.active })),
        p2p: status.p2p.enabled,
        swarm: status.p2p.swarm,
        clients: runtime.runner.list().length,
      },
    },
  };
}

process.on('message', (message: ChildRequest) => {
  if (message.type === 'snapshot') process.send?.({ type: 'snapshot', id: message.id, snapshot: snapshot() });
});
let stopping: Promise<void> | undefined;
const stop = () => {
  stopping ??= runtime.stop().finally(() => process.exit(0));
  return stopping;
};
process.on('disconnect', () => void stop());
process.on('SIGTERM', () => void stop());
const ready: ChildReady = { type: 'ready', port: runtime.port, token: runtime.token };
process.send?.(ready);
