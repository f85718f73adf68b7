/** The calculator environment's grader: 1 when the agent's last number equals the task's answer, else 0. */
interface Input {
  task: { answer: number };
  output: { answer?: unknown } | null;
}

export default function reward({ task, output }: Input): { reward: number; success: boolean } {
  const text = typeof output?.answer === 'string' ? output.answer : '';
  const numbers = text.match(/-?\d+(?:\.\d+)?/g) ?? [];
  const last = numbers.length > 0 ? Number(numbers[numbers.length - 1]) : NaN;
  const success = Math.abs(last - task.answer) < 1e-6;
  return { reward: success ? 1 : 0, success };
}
