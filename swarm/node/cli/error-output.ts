/**
 * How a failed command reads on the terminal: `agentjet CMD: <message>`, a hint line where one helps, and the
 * error's name on a line of its own (`error: ScriptAttachError`), stable for scripts and tests to match, without
 * the class chain (`PeerRequestError: ScriptAttachError: …`) of how the error travelled. `--json` prints the same
 * as one JSON object.
 */
import { PeerRequestError } from './peer-client.ts';

/** What to do next, for the errors whose message alone does not say it. */
const HINTS: Record<string, string> = {
  ModelNotHostedError: '`agentjet status` lists the models this peer (and its swarm) serves',
  ScriptSyntaxError: 'fix the script at that line and attach again; nothing was attached',
  ScriptAttachError: 'nothing was attached; fix the script (or its path) and attach again',
  TaskSourceError: 'nothing was attached; fix the task file at that line and attach again',
  EpisodeNotFoundError: '`agentjet episodes list` lists the episodes',
  RunNotFoundError: '`agentjet runs list` lists the training runs',
};

export interface CliFailure {
  name: string;
  message: string;
  hint?: string;
}

/** The error as the user should see it: the peer's own error name for a refused request, its message alone. */
export function describeFailure(err: unknown): CliFailure {
  const error = err instanceof Error ? err : new Error(String(err));
  const name = error instanceof PeerRequestError ? error.errorName : error.name;
  // Older callers put the remote's name in front of the message; it is on its own line now.
  const message = error.message.startsWith(`${name}: `) ? error.message.slice(name.length + 2) : error.message;
  const hint = HINTS[name];
  return hint ? { name, message, hint } : { name, message };
}

export function formatFailure(command: string, failure: CliFailure, json: boolean): string {
  if (json) return JSON.stringify({ error: failure }) + '\n';
  return `agentjet ${command}: ${failure.message}\n${failure.hint ? `hint: ${failure.hint}\n` : ''}error: ${failure.name}\n`;
}
