/**
 * Guess the number: the environment (this script) holds a secret between 1 and `max`; each move the model
 * guesses and the environment answers "higher", "lower" or "correct". Reward: 1 for finding it, minus a little
 * per move; 0 when the moves run out. The model never sees the secret and never grades itself.
 */
const task = JSON.parse(process.env.AGENTJET_TASK);
const { secret, max, moves } = task;

async function ask(messages) {
  const res = await fetch(`${process.env.OPENAI_BASE_URL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${process.env.OPENAI_API_KEY}` },
    body: JSON.stringify({ model: process.env.AGENTJET_MODEL, messages, max_tokens: 8 }),
  });
  if (!res.ok) throw new Error(`model call failed: ${res.status} ${await res.text()}`);
  return (await res.json()).choices[0].message.content ?? '';
}

/** The environment's answer to one guess. */
function feedback(guess, target) {
  if (!Number.isInteger(guess)) return 'that is not a whole number';
  if (guess < target) return 'higher';
  if (guess > target) return 'lower';
  return 'correct';
}

const messages = [
  { role: 'system', content: `I picked a whole number from 1 to ${max}. Guess it; reply with one number. I will say higher or lower.` },
  { role: 'user', content: 'Your first guess?' },
];
let found = false;
let used = 0;
while (used < moves && !found) {
  const reply = await ask(messages);
  used++;
  const match = reply.match(/-?\d+/);
  const answer = feedback(match ? Number(match[0]) : NaN, secret);
  found = answer === 'correct';
  messages.push({ role: 'assistant', content: reply }, { role: 'user', content: found ? 'correct' : `${answer}. Next guess?` });
}
const reward = found ? 1 - (used - 1) / (2 * moves) : 0;
console.log(JSON.stringify({ reward, success: found, metrics: { moves: used } }));
