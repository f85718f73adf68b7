/**
 * Guess the number, the multi-turn scenario's environment, as the warm start and the demo need it: the rules of
 * examples/guess-the-number/agent.py (the environment the agents run) in TypeScript, so that the warm-start corpus
 * renders exactly the conversations the agent holds. `guess-format.test.ts` plays the Python agent against a
 * scripted endpoint and checks that both say the same words.
 */
import type { ChatMessage } from '../../../worker/tokenizer/types.ts';
import { seededRandom } from '../../../worker/common/random.ts';

export interface GuessTask {
  id: string;
  secret: number;
  max: number;
  moves: number;
  split?: 'eval';
}

/**
 * The scenario's game: 1–7 in 3 guesses. Halving (4, then 2 or 6, then the one left) finds every secret; guessing
 * anywhere in the range left finds about 68%, half the time anywhere at all about 52%. Few enough states that a
 * tiny model learns the search from a few hundred episodes (1–15 in 4 stayed flat over 480 episodes here).
 */
export const GUESS_GAME = { max: 7, moves: 3 } as const;

/** The range still possible after the guesses so far, and whether the last guess found the secret. */
export interface GuessState {
  low: number;
  high: number;
  found: boolean;
  used: number;
}

/**
 * Up to this many numbers still possible are listed one by one ("higher: 5 6 7"), more as a range ("9 to 25"). A
 * small byte-level model picks the middle one of a list more easily than it works out the middle of two bounds: with
 * bounds, the trained tiny model answered "higher: 6 to 7" with 5 — it had learnt "higher means 5", not to read them.
 */
export const LISTED_AT_MOST = 10;

/** The numbers from `low` to `high`, as the environment says them (agent.py's `possible`). */
export function possibleNumbers(low: number, high: number): string {
  if (high - low >= LISTED_AT_MOST) return `${low} to ${high}`;
  return Array.from({ length: high - low + 1 }, (_, i) => String(low + i)).join(' ');
}

export function openingMessages(max: number, moves: number): ChatMessage[] {
  return [
    { role: 'system', content: `I picked a whole number from 1 to ${max}. Find it in ${moves} guesses: reply with one number, and I will say higher or lower.` },
    { role: 'user', content: `${possibleNumbers(1, max)}. Your guess?` },
  ];
}

/** The environment's answer to one reply, and the state after it (agent.py's loop body). */
export function answerGuess(state: GuessState, reply: string, secret: number): { answer: string; state: GuessState } {
  const match = reply.match(/\d+/);
  const guess = match ? Number(match[0]) : null;
  const used = state.used + 1;
  if (guess === secret) return { answer: 'correct', state: { ...state, found: true, used } };
  if (guess === null || guess < state.low || guess > state.high) {
    return { answer: `not one of ${possibleNumbers(state.low, state.high)}. Your guess?`, state: { ...state, used } };
  }
  if (guess < secret) return { answer: `higher: ${possibleNumbers(guess + 1, state.high)}. Your guess?`, state: { ...state, low: guess + 1, used } };
  return { answer: `lower: ${possibleNumbers(state.low, guess - 1)}. Your guess?`, state: { ...state, high: guess - 1, used } };
}

/**
 * agent.py's reward: 1 when found within the moves, else up to 0.4 for the range the moves narrowed. No bonus for
 * finding it early: for one secret that would reward a lucky first guess, which is noise to a policy that cannot see
 * the secret; success within the moves is what halving maximises.
 */
export function guessReward(task: Pick<GuessTask, 'max' | 'moves'>, state: GuessState): number {
  if (state.found) return 1;
  return (0.4 * (task.max - (state.high - state.low + 1))) / (task.max - 1);
}

export function startState(max: number): GuessState {
  return { low: 1, high: max, found: false, used: 0 };
}

/**
 * Plays one game with `policy` choosing each reply from the messages so far; returns the whole conversation (the
 * last assistant turn is the final guess: the environment's closing answer is not part of any prompt).
 */
export async function playGuess(task: GuessTask, policy: (messages: ChatMessage[], state: GuessState) => Promise<string> | string): Promise<{ messages: ChatMessage[]; state: GuessState; reward: number }> {
  const messages = openingMessages(task.max, task.moves);
  let state = startState(task.max);
  while (state.used < task.moves && !state.found) {
    const reply = await policy(messages, state);
    const next = answerGuess(state, reply, task.secret);
    state = next.state;
    messages.push({ role: 'assistant', content: reply });
    if (!state.found && state.used < task.moves) messages.push({ role: 'user', content: next.answer });
  }
  return { messages, state, reward: guessReward(task, state) };
}

/**
 * `count` games of GUESS_GAME with seeded secrets. Every secret is possible in both splits: what the model learns is
 * a way to search, which no secret can be memorised for (a policy that halves finds every one).
 */
export function makeGuessTasks(count: number, seed: number, prefix: string, heldOut: boolean): GuessTask[] {
  const rand = seededRandom(seed);
  return Array.from({ length: count }, (_, i) => ({
    id: `${prefix}-${i}`,
    secret: 1 + Math.floor(rand() * GUESS_GAME.max),
    ...GUESS_GAME,
    ...(heldOut ? { split: 'eval' as const } : {}),
  }));
}
