/**
 * Synthetic agent episodes for the equivalence test and the merge benchmark: an append-only ReAct-style agent
 * (system prompt with the task, then per turn an action the policy generates and an observation the environment
 * returns), driven through the real context tracker (render with splicing → record) over the builtin byte
 * tokenizer and ChatML template, so that merged and naive samples come from the real tracker and merger.
 *
 * With the byte tokenizer one ASCII character is one token, so the workload sizes below are token counts.
 */
import { builtinTokenizerBundle } from '../../../../worker/tokenizer/load.ts';
import { IM_END_ID } from '../../../../worker/tokenizer/byte-tokenizer.ts';
import type { ChatMessage } from '../../../../worker/tokenizer/types.ts';
import { EpisodeTracker } from '../../tracker/tracker.ts';

export interface AgentWorkload {
  turns: number;
  /** System prompt + task, in tokens. */
  promptTokens: number;
  /** Each environment observation (tool output), in tokens. */
  observationTokens: number;
  /** Each action the policy generates, in tokens (plus the end-of-turn token). */
  actionTokens: number;
}

/** The AppWorld-like workload: a long system prompt and API docs, then short code actions and longer outputs. */
export const APPWORLD_LIKE: AgentWorkload = { turns: 25, promptTokens: 1000, observationTokens: 150, actionTokens: 60 };

const WORDS = ['apis', 'spotify', 'login', 'song', 'playlist', 'print', 'for', 'in', 'return', 'page', 'user', 'email', 'venmo', 'amount', 'show', 'file', 'id', 'name', 'True', 'None'];

/** Deterministic pseudo-random ASCII text of exactly `length` characters. */
export function syntheticText(length: number, seed: number): string {
  let state = (seed * 2654435761) >>> 0 || 1;
  const next = () => {
    // xorshift32: cheap, deterministic, good enough to vary the words.
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state;
  };
  let text = '';
  while (text.length < length) text += WORDS[next() % WORDS.length] + (next() % 7 === 0 ? '.\n' : ' ');
  return text.slice(0, length);
}

export interface SyntheticEpisodeOptions {
  /** Varies the texts between episodes. */
  seed: number;
  /**
   * The task: system prompt and task text come from it (default: `seed`). The repeats of one task in a GRPO group
   * share it and differ in `seed`, so they open with the same context and then act and observe differently.
   */
  taskSeed?: number;
  policyVersion?: number;
  /** Logprob recorded for generated token i of call c (defaults to a fixed made-up value). */
  logprob?: (call: number, token: number) => number;
}

/** The conversation an episode opens with: the system prompt and the task, `promptTokens` long once rendered. */
export function openingMessages(workload: AgentWorkload, seed: number): ChatMessage[] {
  // Budgets include the template's markup: ~87 tokens around system + task, ~28 around each observation.
  const task = syntheticText(Math.min(170, workload.promptTokens), seed + 1);
  const system = syntheticText(Math.max(1, workload.promptTokens - task.length - 87), seed);
  return [
    { role: 'system', content: `You are an agent that solves tasks by writing code.\n${system}` },
    { role: 'user', content: `Task: ${task}` },
  ];
}

/** What the environment answers to the action of `turn`, `observationTokens` long once rendered. */
export function observationMessage(workload: AgentWorkload, seed: number, turn: number): ChatMessage {
  return { role: 'user', content: `Output:\n${syntheticText(Math.max(1, workload.observationTokens - 28), seed * 1000 + turn * 2 + 1)}` };
}

/** Runs one episode of `workload` through a fresh tracker and returns it (its `calls` and `merge()` are real). */
export function runSyntheticEpisode(workload: AgentWorkload, options: SyntheticEpisodeOptions): EpisodeTracker {
  const { tokenizer, template } = builtinTokenizerBundle();
  const tracker = new EpisodeTracker({ episodeId: `synthetic-${options.seed}`, tokenizer, template });
  const logprob = options.logprob ?? ((c: number, t: number) => -0.5 - ((c + t) % 5) / 10);
  const messages = openingMessages(workload, options.taskSeed ?? options.seed);
  let clock = Date.parse('2026-01-01T00:00:00Z');
  for (let turn = 0; turn < workload.turns; turn++) {
    const rendered = tracker.render(messages);
    const action = syntheticText(workload.actionTokens, options.seed * 1000 + turn * 2);
    const generatedIds = [...tokenizer.encode(action), IM_END_ID];
    const at = new Date((clock += 1000)).toISOString();
    tracker.record({
      messages: [...messages],
      rendered,
      generatedIds,
      logprobs: generatedIds.map((_, i) => logprob(turn, i)),
      assistantMessage: { role: 'assistant', content: action },
      finishReason: 'stop',
      policyVersion: options.policyVersion ?? 0,
      timings: { startedAt: at, firstTokenAt: at, endedAt: at },
    });
    messages.push({ role: 'assistant', content: action });
    messages.push(observationMessage(workload, options.seed, turn));
  }
  return tracker;
}
