/** How `agentjet attach --dry-run` prints its one episode: the transcript, the result, and the output's tail. */
import type { DryRunResult } from '../../common/runner-api.ts';

/** Of the script's stdout and stderr, the last lines: where a traceback or the result line is. */
const OUTPUT_TAIL_LINES = 20;
/** A message longer than this is cut in the transcript (a whole task description is rarely what one looks for). */
const MESSAGE_CHARS = 2000;

export function formatDryRun(result: DryRunResult): string {
  const { run, calls } = result;
  const lines: string[] = [`dry run of ${run.client} on task ${run.taskId} (${calls.length} call${calls.length === 1 ? '' : 's'})`];
  calls.forEach((call, i) => {
    lines.push('', `── call ${i + 1}`);
    for (const message of call.messages) lines.push(messageLine(message));
    lines.push(`${messageLine(call.assistantMessage, 'assistant')}${call.finishReason ? `   [${call.finishReason}]` : ''}`);
  });
  lines.push('', `result: ${run.status}${run.reward !== null ? `, reward ${run.reward}` : ''}${run.code ? `, code ${run.code}` : ''}`);
  if (run.reason) lines.push(`reason: ${run.reason}`);
  for (const [label, text] of [['stdout', run.stdout], ['stderr', run.stderr]] as const) {
    if (!text.trim()) continue;
    lines.push('', `${label} (last lines):`, ...tail(text).map((l) => `  ${l}`));
  }
  return lines.join('\n') + '\n';
}

function messageLine(message: unknown, fallbackRole = '?'): string {
  if (message === null || typeof message !== 'object') return `${fallbackRole}: (none)`;
  const m = message as { role?: string; content?: unknown; tool_calls?: unknown };
  const content = typeof m.content === 'string' ? m.content : m.content === undefined || m.content === null ? '' : JSON.stringify(m.content);
  const tools = m.tool_calls ? ` tool_calls=${JSON.stringify(m.tool_calls)}` : '';
  const text = (content + tools).replace(/\s+/g, ' ').trim();
  return `${m.role ?? fallbackRole}: ${text.length > MESSAGE_CHARS ? text.slice(0, MESSAGE_CHARS) + '…' : text}`;
}

function tail(text: string): string[] {
  return text.trimEnd().split('\n').slice(-OUTPUT_TAIL_LINES);
}
