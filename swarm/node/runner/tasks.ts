/**
 * Task sources: a JSONL file (one `{"id", …}` object per line), a generator module (default export: a function
 * returning an iterable or async iterable of tasks, or the iterable itself), or tasks given inline. Tasks with
 * `"split": "eval"` are the held-out split: they run once per pass as eval episodes, never trained on; every
 * other task runs `repeat` times in a row (one GRPO group) as train episodes.
 */
import { readFileSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { taskSchema, type Task } from '../../common/runner-api.ts';
import { NODE_SCRIPT_EXTENSIONS } from '../../common/script-extensions.ts';
import { TaskSourceError } from './errors.ts';

export type TaskSource = { path: string } | { inline: Task[] };

export interface EpisodeSpec {
  task: Task;
  taskId: string;
  kind: 'train' | 'eval';
}

/** Splits that mean "held out": evaluated, never trained on. */
const HELD_OUT_SPLITS = new Set(['eval', 'test', 'heldout', 'held-out', 'validation']);

export function isHeldOut(task: Task): boolean {
  return typeof task.split === 'string' && HELD_OUT_SPLITS.has(task.split.toLowerCase());
}

/** Parses JSONL text; the error names the line (1-based) and what is wrong with it. */
export function parseJsonl(text: string, file = 'tasks'): Task[] {
  const tasks: Task[] = [];
  const seen = new Set<string>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (err) {
      throw new TaskSourceError(`${file}:${line}: not valid JSON (${(err as Error).message})`, line);
    }
    const task = checkTask(value, `${file}:${line}`, line);
    if (seen.has(String(task.id))) throw new TaskSourceError(`${file}:${line}: duplicate task id "${task.id}"`, line);
    seen.add(String(task.id));
    tasks.push(task);
  });
  if (tasks.length === 0) throw new TaskSourceError(`${file}: no tasks (expected one JSON object per line)`);
  return tasks;
}

function checkTask(value: unknown, where: string, line?: number): Task {
  const parsed = taskSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.join('.');
    throw new TaskSourceError(`${where}: ${field ? `"${field}" ` : ''}${issue.message} (each task is an object with an "id")`, line);
  }
  return parsed.data as Task;
}

/** One pass over the source's tasks (a generator module is called again for every pass). */
export type TaskPass = () => AsyncIterable<Task>;

export async function openTaskSource(source: TaskSource): Promise<TaskPass> {
  if ('inline' in source) {
    const tasks = source.inline.map((t, i) => checkTask(t, `tasks[${i}]`));
    return async function* inlinePass() {
      yield* tasks;
    };
  }
  const path = resolve(source.path);
  // A generator module is any module Node runs; anything else is JSONL.
  if (NODE_SCRIPT_EXTENSIONS.includes(extname(path))) return openGenerator(path);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new TaskSourceError(`cannot read task file ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const tasks = parseJsonl(text, path);
  return async function* filePass() {
    yield* tasks;
  };
}

async function openGenerator(path: string): Promise<TaskPass> {
  let mod: { default?: unknown; tasks?: unknown };
  try {
    mod = (await import(pathToFileURL(path).href)) as typeof mod;
  } catch (err) {
    throw new TaskSourceError(`cannot load task generator ${path}: ${(err as Error).message}`);
  }
  const exported = mod.default ?? mod.tasks;
  if (exported === undefined) throw new TaskSourceError(`${path} exports no tasks: export default a function or an iterable of tasks`);
  return async function* generatorPass() {
    const produced = typeof exported === 'function' ? await (exported as () => unknown)() : exported;
    if (!isIterable(produced)) throw new TaskSourceError(`${path}: the default export must give an iterable or async iterable of tasks`);
    let index = 0;
    for await (const value of produced) yield checkTask(value, `${path} task #${index++}`);
  };
}

function isIterable(value: unknown): value is Iterable<unknown> | AsyncIterable<unknown> {
  return value != null && (typeof (value as Iterable<unknown>)[Symbol.iterator] === 'function' || typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function');
}

/**
 * The episodes to run, in order: per pass, each train task `repeat` times back to back (its GRPO group), then
 * each held-out task once as eval. Stops after `epochs` passes (never, when undefined). Each held-out task is shown
 * to `heldOutSeen` first: when it answers true, something else schedules the task's evals (every N steps, as the
 * server asks) and the pass does not run it.
 */
export async function* episodeSpecs(
  pass: TaskPass,
  repeat: number,
  epochs: number | undefined,
  heldOutSeen: (task: Task) => boolean = () => false,
): AsyncGenerator<EpisodeSpec> {
  for (let epoch = 0; epochs === undefined || epoch < epochs; epoch++) {
    const heldOut: Task[] = [];
    let any = false;
    for await (const task of pass()) {
      any = true;
      if (isHeldOut(task)) {
        if (!heldOutSeen(task)) heldOut.push(task);
        continue;
      }
      for (let r = 0; r < repeat; r++) yield { task, taskId: String(task.id), kind: 'train' };
    }
    for (const task of heldOut) yield { task, taskId: String(task.id), kind: 'eval' };
    if (!any) return;
  }
}
