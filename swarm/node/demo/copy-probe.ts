/* Scratch probe (deleted before handing back): copy accuracy of a checkpoint on the calculator format. */
import '../../../p2p/polyfill.ts';
import { createEngineFromWeights } from '../../../worker/engine.ts';
import { readModelFolder } from '../../../worker/node/hf-folder.ts';
import { IM_END_ID, TOOL_CALL_START_ID } from '../../../worker/tokenizer/byte-tokenizer.ts';
import { builtinTokenizerBundle } from '../../../worker/tokenizer/load.ts';
import { CALC_TOOL, firstMessages, makeTasks } from './calc-format.ts';
const { tokenizer, template } = builtinTokenizerBundle();
const ck = await readModelFolder(process.argv[2]);
const e = await createEngineFromWeights({ name: 'x', config: ck.config, weights: ck.tensors, tokenizer, seed: 1 });
const tasks = makeTasks(Number(process.argv[3] ?? 24), 4242, 'p');
const s = (t: number, seed: number) => ({ maxTokens: 64, temperature: t, topP: 1, topK: 0, seed, stopTokenIds: [IM_END_ID], stopStrings: [], topLogprobs: 0 });
for (const temp of [0, 1]) {
  const res = await Promise.all(tasks.map(async (task, i) => {
    const p = tokenizer.encode(template.render(firstMessages(task), { tools: [CALC_TOOL], addGenerationPrompt: true }));
    const r = await e.generate({ promptIds: [...p, TOOL_CALL_START_ID], sampling: s(temp, i) });
    const text = tokenizer.decode(r.tokens.map((t) => t.id));
    const ok = text.includes(`"expr": "${task.expression}"}}`);
    // answer copy: give the correct tool response and see the answer
    const msgs = [...firstMessages(task), { role: 'assistant' as const, content: '', tool_calls: [{ id: 'c', type: 'function' as const, function: { name: 'calc', arguments: JSON.stringify({ expr: task.expression }) } }] }, { role: 'tool' as const, content: String(task.answer), tool_call_id: 'c' }];
    const p2 = tokenizer.encode(template.render(msgs, { tools: [CALC_TOOL], addGenerationPrompt: true }));
    const r2 = await e.generate({ promptIds: p2, sampling: s(temp, i + 99) });
    const ans = tokenizer.decode(r2.tokens.map((t) => t.id).filter((id) => id !== IM_END_ID)).trim();
    return { ok, ans: ans === String(task.answer), text: text.slice(0, 60) };
  }));
  console.log(`T=${temp} call-copy ${res.filter((r) => r.ok).length}/${res.length} answer-copy ${res.filter((r) => r.ans).length}/${res.length}`, JSON.stringify(res.slice(0, 3).map((r) => r.text)));
}
