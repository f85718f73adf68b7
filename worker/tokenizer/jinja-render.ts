/**
 * Rendering a compiled @huggingface/jinja template the way Hugging Face's Python renderer does where it matters for
 * agents: `tojson` writes `json.dumps` output (python-json.ts) — numbers and key order of the client's JSON kept
 * (via parseJsonKeepingSource), floats as Python's repr, Python's escaping, `indent=0` as Python lays it out.
 *
 * Why not `Template.render`: it builds its environment and interpreter inside, and the package's `tojson` writes
 * from JS values (`1.0` → `1`). So the environment is built here (the package's globals, restated below), the
 * runtime values it makes from the context are annotated with the source numbers and key order, and `tojson` is
 * answered here; every other filter is the package's. The package is pinned (package.json), and the two internals
 * used here — the interpreter's `applyFilter` and runtime values' `type`/`value` — are checked by the tests.
 */
import { Environment, Interpreter, type Template } from '@huggingface/jinja';
import { jsonSourceOf, pythonFloatRepr, pythonJsonString, pythonNumberText, type SourceJson } from './python-json.ts';

/** The runtime values of @huggingface/jinja, as far as this file reads them (the package exports no types). */
interface RuntimeValue {
  type: string;
  value: unknown;
}

type AstNode = { type: string } & Record<string, unknown>;
type ApplyFilter = (operand: RuntimeValue, filter: AstNode, env: Environment) => RuntimeValue;

/** The package's string value class (not exported), taken from a value it makes. */
const StringValue = (new Environment().set('s', '') as RuntimeValue).constructor as new (value: string) => RuntimeValue;

export class TemplateJsonError extends Error {
  override name = 'TemplateJsonError';
}

/** Renders with `context` as the template's variables. */
export function renderTemplate(template: Template, context: Record<string, unknown>): string {
  const env = new Environment();
  setupGlobals(env);
  const numberTexts = new WeakMap<RuntimeValue, string>();
  for (const [name, value] of Object.entries(context)) {
    annotate(env.set(name, value) as RuntimeValue, value, numberTexts);
  }
  const interpreter = new Interpreter(env);
  const internals = interpreter as unknown as { applyFilter: ApplyFilter };
  const packageFilter = internals.applyFilter.bind(interpreter);
  internals.applyFilter = (operand, filter, scope) => {
    const call = toJsonCall(filter);
    if (!call) return packageFilter(operand, filter, scope);
    const options = toJsonOptions(call.args.map((arg) => evaluateArgument(interpreter, arg, scope)));
    return new StringValue(pythonDumps(operand, options, numberTexts));
  };
  return (interpreter.run(template.parsed) as RuntimeValue).value as string;
}

/** The globals `Template.render` declares (package `setupGlobals`, not exported), restated. */
function setupGlobals(env: Environment): void {
  for (const [name, value] of [['false', false], ['true', true], ['none', null], ['False', false], ['True', true], ['None', null]] as const) {
    env.set(name, value);
  }
  env.set('raise_exception', (message: unknown) => {
    throw new Error(String(message));
  });
  env.set('range', range);
  env.set('strftime_now', (format: string) => strftime(new Date(), format));
}

function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error('range() step must not be zero');
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/** The package's strftime subset (%Y %m %d %b %B %H %M %%). */
function strftime(date: Date, format: string): string {
  const pad2 = (n: number) => String(n).padStart(2, '0');
  return format.replace(/%[YmdbBHM%]/g, (token) => {
    switch (token) {
      case '%Y': return String(date.getFullYear());
      case '%m': return pad2(date.getMonth() + 1);
      case '%d': return pad2(date.getDate());
      case '%b': return new Intl.DateTimeFormat(undefined, { month: 'short' }).format(date);
      case '%B': return new Intl.DateTimeFormat(undefined, { month: 'long' }).format(date);
      case '%H': return pad2(date.getHours());
      case '%M': return pad2(date.getMinutes());
      default: return '%';
    }
  });
}

/**
 * Walks the runtime value made of `plain` and, below every object or array parsed with its source, puts the keys in
 * the order written and remembers each number's text. A source that no longer matches its value (changed after
 * parsing) is ignored there: its values are written from their types.
 */
function annotate(rv: RuntimeValue, plain: unknown, numberTexts: WeakMap<RuntimeValue, string>): void {
  if (plain === null || typeof plain !== 'object') return;
  const source = jsonSourceOf(plain);
  if (source !== undefined && matches(rv, source)) {
    applySource(rv, source, numberTexts);
    return;
  }
  if (Array.isArray(plain) && isArrayValue(rv)) {
    const items = rv.value as RuntimeValue[];
    items.forEach((item, i) => annotate(item, plain[i], numberTexts));
  } else if (isObjectValue(rv)) {
    for (const [key, child] of rv.value as Map<string, RuntimeValue>) annotate(child, (plain as Record<string, unknown>)[key], numberTexts);
  }
}

function matches(rv: RuntimeValue, source: SourceJson): boolean {
  if (source === null || typeof source !== 'object') return rv.value === source;
  if (source.kind === 'number') return isNumberValue(rv) && rv.value === Number(source.text);
  if (source.kind === 'array') {
    const items = rv.value as RuntimeValue[];
    return isArrayValue(rv) && items.length === source.items.length && items.every((item, i) => matches(item, source.items[i]));
  }
  if (!isObjectValue(rv)) return false;
  const map = rv.value as Map<string, RuntimeValue>;
  if (map.size !== source.entries.size) return false;
  for (const [key, child] of source.entries) {
    const value = map.get(key);
    if (value === undefined || !matches(value, child)) return false;
  }
  return true;
}

function applySource(rv: RuntimeValue, source: SourceJson, numberTexts: WeakMap<RuntimeValue, string>): void {
  if (source === null || typeof source !== 'object') return;
  if (source.kind === 'number') {
    numberTexts.set(rv, source.text);
  } else if (source.kind === 'array') {
    (rv.value as RuntimeValue[]).forEach((item, i) => applySource(item, source.items[i], numberTexts));
  } else {
    const map = rv.value as Map<string, RuntimeValue>;
    const ordered = [...source.entries.keys()].map((key) => [key, map.get(key) as RuntimeValue] as const);
    map.clear();
    for (const [key, value] of ordered) {
      map.set(key, value);
      applySource(value, source.entries.get(key) ?? null, numberTexts);
    }
  }
}

const isArrayValue = (rv: RuntimeValue) => rv.type === 'ArrayValue' || rv.type === 'TupleValue';
const isObjectValue = (rv: RuntimeValue) => rv.type === 'ObjectValue' || rv.type === 'KeywordArgumentsValue' || rv.type === 'NamespaceValue';
const isNumberValue = (rv: RuntimeValue) => rv.type === 'IntegerValue' || rv.type === 'FloatValue';

/** HF's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False). */
interface DumpsOptions {
  ensureAscii: boolean;
  indent: number | null;
  separators: [string, string] | null;
  sortKeys: boolean;
}

/** `x | tojson` or `x | tojson(…)`: the call's argument expressions; undefined for any other filter. */
function toJsonCall(filter: AstNode): { args: AstNode[] } | undefined {
  if (filter.type === 'Identifier') return filter.value === 'tojson' ? { args: [] } : undefined;
  if (filter.type !== 'CallExpression') return undefined;
  const callee = filter.callee as AstNode;
  return callee.type === 'Identifier' && callee.value === 'tojson' ? { args: filter.args as AstNode[] } : undefined;
}

type Argument = { keyword?: string; value: RuntimeValue };

function evaluateArgument(interpreter: Interpreter, arg: AstNode, scope: Environment): Argument {
  if (arg.type === 'KeywordArgumentExpression') {
    const key = (arg.key as AstNode).value as string;
    return { keyword: key, value: interpreter.evaluate(arg.value as never, scope) as RuntimeValue };
  }
  return { value: interpreter.evaluate(arg as never, scope) as RuntimeValue };
}

const TOJSON_PARAMETERS = ['ensure_ascii', 'indent', 'separators', 'sort_keys'] as const;

function toJsonOptions(args: Argument[]): DumpsOptions {
  const given = new Map<string, RuntimeValue>();
  args.forEach((arg, i) => {
    const name = arg.keyword ?? TOJSON_PARAMETERS[i];
    if (!TOJSON_PARAMETERS.includes(name as (typeof TOJSON_PARAMETERS)[number])) throw new TemplateJsonError(`tojson() got an unexpected argument ${name ?? `#${i + 1}`}`);
    given.set(name, arg.value);
  });
  const isNone = (v: RuntimeValue | undefined) => v === undefined || v.type === 'NullValue' || v.type === 'UndefinedValue';
  const indent = given.get('indent');
  const separators = given.get('separators');
  let seps: [string, string] | null = null;
  if (!isNone(separators)) {
    const parts = isArrayValue(separators as RuntimeValue) ? ((separators as RuntimeValue).value as RuntimeValue[]) : [];
    if (parts.length !== 2 || parts.some((p) => p.type !== 'StringValue')) throw new TemplateJsonError('tojson separators must be two strings');
    seps = [parts[0].value as string, parts[1].value as string];
  }
  if (!isNone(indent) && indent?.type !== 'IntegerValue') throw new TemplateJsonError('tojson indent must be an integer');
  return {
    ensureAscii: given.get('ensure_ascii')?.value === true,
    indent: isNone(indent) ? null : (indent?.value as number),
    separators: seps,
    sortKeys: given.get('sort_keys')?.value === true,
  };
}

/** Python's json.dumps of a runtime value. */
function pythonDumps(rv: RuntimeValue, options: DumpsOptions, numberTexts: WeakMap<RuntimeValue, string>): string {
  const [itemSep, keySep] = options.separators ?? (options.indent === null ? [', ', ': '] : [',', ': ']);
  const write = (v: RuntimeValue, level: number): string => {
    switch (v.type) {
      case 'NullValue':
      case 'UndefinedValue': // Python raises on Undefined; the package writes null, and so does this.
        return 'null';
      case 'BooleanValue':
        return v.value ? 'true' : 'false';
      case 'IntegerValue':
      case 'FloatValue': {
        const text = numberTexts.get(v);
        if (text !== undefined) return pythonNumberText(text);
        return v.type === 'FloatValue' ? pythonFloatRepr(v.value as number) : String(v.value);
      }
      case 'StringValue':
        return pythonJsonString(v.value as string, options.ensureAscii);
      default:
        break;
    }
    let parts: string[];
    let open: string;
    let close: string;
    if (isArrayValue(v)) {
      parts = (v.value as RuntimeValue[]).map((item) => write(item, level + 1));
      [open, close] = ['[', ']'];
    } else if (isObjectValue(v)) {
      let entries = [...(v.value as Map<string, RuntimeValue>)];
      if (options.sortKeys) entries = entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      parts = entries.map(([key, value]) => `${pythonJsonString(key, options.ensureAscii)}${keySep}${write(value, level + 1)}`);
      [open, close] = ['{', '}'];
    } else {
      throw new TemplateJsonError(`Object of type ${v.type} is not JSON serializable`);
    }
    if (parts.length === 0) return open + close;
    if (options.indent === null) return open + parts.join(itemSep) + close;
    const pad = (n: number) => '\n' + ' '.repeat(options.indent as number).repeat(n);
    return open + pad(level + 1) + parts.join(itemSep + pad(level + 1)) + pad(level) + close;
  };
  return write(rv, 0);
}
