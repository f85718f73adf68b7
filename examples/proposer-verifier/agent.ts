/**
 * A two-model team: the proposer answers a yes/no arithmetic claim, the verifier checks the proposer's answer.
 * The environment knows the truth (task.truth) and rewards each role separately:
 *   proposer: 1 when its answer is right;  verifier: 1 when its verdict (agree/disagree) is right.
 * Attach with `--team proposer=MODEL_A,verifier=MODEL_B`; the runner sets OPENAI_*_PROPOSER / _VERIFIER.
 */
import OpenAI from 'openai';

interface Task {
  id: string;
  claim: string;
  truth: boolean;
}

const task = JSON.parse(process.env.AGENTJET_TASK!) as Task;

function clientFor(role: 'PROPOSER' | 'VERIFIER') {
  return {
    openai: new OpenAI({ baseURL: process.env[`OPENAI_BASE_URL_${role}`], apiKey: process.env[`OPENAI_API_KEY_${role}`], maxRetries: 0 }),
    model: process.env[`AGENTJET_MODEL_${role}`]!,
  };
}

async function say(role: 'PROPOSER' | 'VERIFIER', system: string, user: string): Promise<string> {
  const { openai, model } = clientFor(role);
  const completion = await openai.chat.completions.create({
    model,
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    max_tokens: 8,
  });
  return completion.choices[0].message.content ?? '';
}

/** "yes"/"no" (or "agree"/"disagree") read leniently; anything else counts as no answer. */
function yesNo(text: string, yes: string, no: string): boolean | null {
  const t = text.toLowerCase();
  if (t.includes(no)) return false;
  if (t.includes(yes)) return true;
  return null;
}

const proposal = await say('PROPOSER', 'Is the claim true? Answer yes or no.', task.claim);
const proposed = yesNo(proposal, 'yes', 'no');
const verdict = await say('VERIFIER', 'Another model answered a yes/no question. Reply agree or disagree.', `Claim: ${task.claim}\nAnswer: ${proposal}`);
const agrees = yesNo(verdict, 'agree', 'disagree');

const proposerRight = proposed === task.truth;
const verifierRight = agrees !== null && agrees === proposerRight;
console.log(JSON.stringify({ rewards: { proposer: proposerRight ? 1 : 0, verifier: verifierRight ? 1 : 0 }, success: proposerRight }));
