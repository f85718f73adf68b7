/**
 * The launcher's own process (launcher.ts): runs agent processes for the peer that started it, each through
 * runProcess, and answers each run's result over the IPC channel. It lives as long as the channel: when the peer
 * goes (stopped, crashed or killed) the channel closes, every run here is aborted (its process group killed), and
 * with nothing left to wait for the process ends.
 */
import { runProcess, type ProcessResult, type ProcessSpec } from './process.ts';

/** A run's spec as it crosses the channel: the abort and the spawn notice are messages of their own. */
export type LaunchSpec = Omit<ProcessSpec, 'signal' | 'onSpawn'>;

export type LaunchRequest = { kind: 'run'; id: number; spec: LaunchSpec } | { kind: 'abort'; id: number; reason: string };

export type LaunchReply =
  /** Listening: requests sent before this could be lost. */
  | { kind: 'ready' }
  /** The run's process (and group) id, so that the peer can kill the group should this process die first. */
  | { kind: 'started'; id: number; pid: number }
  | { kind: 'done'; id: number; result: ProcessResult };

const runs = new Map<number, AbortController>();

function reply(message: LaunchReply) {
  // A closed channel means the peer is gone: the disconnect handler aborts the runs, nobody waits for the answer.
  if (process.connected) process.send!(message);
}

process.on('message', (message: LaunchRequest) => {
  if (message.kind === 'abort') {
    runs.get(message.id)?.abort(message.reason);
    return;
  }
  const controller = new AbortController();
  runs.set(message.id, controller);
  void runProcess({ ...message.spec, signal: controller.signal, onSpawn: (pid) => reply({ kind: 'started', id: message.id, pid }) }).then((result) => {
    runs.delete(message.id);
    reply({ kind: 'done', id: message.id, result });
  });
});

process.on('disconnect', () => {
  for (const controller of runs.values()) controller.abort('the peer that launched it is gone');
});

reply({ kind: 'ready' });
