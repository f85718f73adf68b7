/**
 * JSON as Python writes it: the `tojson` filter of Hugging Face's chat-template renderer
 * (`json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=False)`), which the templates
 * were written for, and a JSON parser that keeps what JS objects lose of the client's JSON.
 *
 * Why: JS values cannot hold `1.0` apart from `1`, and JS objects put integer-like keys ("10") first, so a
 * `JSON.parse` → `tojson` round trip renders `{"x": 1.0, "10": "a"}` as `{"10": "a", "x": 1}`, while Python's
 * `json.loads` → `json.dumps` keeps both. The parser here returns ordinary JS values and remembers, per object and
 * array it made, the source node (number texts, key order as written) in a WeakMap; the template render
 * (chat-template.ts) uses it to write those values as Python would. Values built any other way are written from
 * their runtime type (an integral float still prints as `1.0`).
 */

/** A parsed JSON value as the text wrote it: numbers keep their text, objects their key order. */
export type SourceJson =
  | null
  | boolean
  | string
  | { readonly kind: 'number'; readonly text: string }
  | { readonly kind: 'array'; readonly items: SourceJson[] }
  | { readonly kind: 'object'; readonly entries: Map<string, SourceJson> };

/** The source node of each object and array that parseJsonKeepingSource returned. */
const sources = new WeakMap<object, SourceJson>();

export function jsonSourceOf(value: object): SourceJson | undefined {
  return sources.get(value);
}

/**
 * Compact JSON text of a value, from its source where the parser kept one (numbers and key order as the client
 * wrote them), else JSON.stringify: an object that has to travel as a string (an Anthropic `tool_use.input` becomes
 * a tool call's `arguments`) and be parsed again loses nothing on the way.
 */
export function jsonTextKeepingSource(value: unknown): string {
  const source = value !== null && typeof value === 'object' ? sources.get(value) : undefined;
  return source === undefined ? JSON.stringify(value) : sourceText(source);
}

function sourceText(node: SourceJson): string {
  if (node === null || typeof node === 'boolean') return String(node);
  if (typeof node === 'string') return JSON.stringify(node);
  if (node.kind === 'number') return node.text;
  if (node.kind === 'array') return `[${node.items.map(sourceText).join(',')}]`;
  return `{${[...node.entries].map(([key, item]) => `${JSON.stringify(key)}:${sourceText(item)}`).join(',')}}`;
}

export class JsonSourceSyntaxError extends Error {
  override name = 'JsonSourceSyntaxError';
}

/**
 * Deep enough for any tool schema, shallow enough that the recursive descent cannot overflow the stack (the
 * gateway's body check refuses deeper bodies before this runs).
 */
export const MAX_SOURCE_DEPTH = 256;

/**
 * `JSON.parse(text)`, with every object and array registered with its source node (jsonSourceOf). Duplicate keys
 * keep the first key's place and the last value, as both JS and Python do.
 */
export function parseJsonKeepingSource(text: string): unknown {
  const parser = new SourceParser(text);
  const [plain] = parser.parseDocument();
  return plain;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/** A string token's extent; JSON.parse of the token then refuses what JSON refuses inside (control characters, bad escapes). */
const STRING = /"(?:[^"\\]|\\.)*"/sy;
const WHITESPACE = /[ \t\n\r]*/y;

class SourceParser {
  private pos = 0;

  constructor(private readonly text: string) {}

  parseDocument(): [unknown, SourceJson] {
    const result = this.value(0);
    this.skipWhitespace();
    if (this.pos !== this.text.length) this.fail('unexpected text after the JSON value');
    return result;
  }

  private value(depth: number): [unknown, SourceJson] {
    if (depth > MAX_SOURCE_DEPTH) this.fail(`nested deeper than ${MAX_SOURCE_DEPTH} levels`);
    this.skipWhitespace();
    const c = this.text[this.pos];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') {
      const s = this.string();
      return [s, s];
    }
    for (const [word, v] of LITERALS) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return [v, v];
      }
    }
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (!m) this.fail('expected a JSON value');
    this.pos += m[0].length;
    return [Number(m[0]), { kind: 'number', text: m[0] }];
  }

  private object(depth: number): [unknown, SourceJson] {
    this.pos++;
    const plain: Record<string, unknown> = {};
    const node = { kind: 'object' as const, entries: new Map<string, SourceJson>() };
    this.skipWhitespace();
    if (this.text[this.pos] === '}') {
      this.pos++;
    } else {
      for (;;) {
        this.skipWhitespace();
        if (this.text[this.pos] !== '"') this.fail('expected a string key');
        const key = this.string();
        this.skipWhitespace();
        if (this.text[this.pos] !== ':') this.fail('expected ":"');
        this.pos++;
        const [v, source] = this.value(depth + 1);
        // Define, not assign: a "__proto__" key is data, as JSON.parse makes it.
        Object.defineProperty(plain, key, { value: v, enumerable: true, writable: true, configurable: true });
        node.entries.set(key, source);
        if (this.separatorOrEnd('}')) break;
      }
    }
    sources.set(plain, node);
    return [plain, node];
  }

  private array(depth: number): [unknown, SourceJson] {
    this.pos++;
    const plain: unknown[] = [];
    const node = { kind: 'array' as const, items: [] as SourceJson[] };
    this.skipWhitespace();
    if (this.text[this.pos] === ']') {
      this.pos++;
    } else {
      for (;;) {
        const [v, source] = this.value(depth + 1);
        plain.push(v);
        node.items.push(source);
        if (this.separatorOrEnd(']')) break;
      }
    }
    sources.set(plain, node);
    return [plain, node];
  }

  /** After an element: true at the closing bracket, false after a comma. */
  private separatorOrEnd(close: string): boolean {
    this.skipWhitespace();
    const c = this.text[this.pos++];
    if (c === close) return true;
    if (c !== ',') this.fail(`expected "," or "${close}"`);
    return false;
  }

  private string(): string {
    STRING.lastIndex = this.pos;
    const m = STRING.exec(this.text);
    if (!m) this.fail('malformed string');
    let value: string;
    try {
      value = JSON.parse(m[0]) as string;
    } catch {
      this.fail('malformed string');
    }
    this.pos += m[0].length;
    return value;
  }

  private skipWhitespace(): void {
    WHITESPACE.lastIndex = this.pos;
    WHITESPACE.exec(this.text);
    this.pos = WHITESPACE.lastIndex;
  }

  private fail(message: string): never {
    throw new JsonSourceSyntaxError(`${message} at position ${this.pos}`);
  }
}

const LITERALS: ReadonlyArray<readonly [string, boolean | null]> = [
  ['true', true],
  ['false', false],
  ['null', null],
];

/** A JSON number's text as `json.dumps(json.loads(text))` writes it: ints as written, floats as Python's repr. */
export function pythonNumberText(text: string): string {
  if (/[.eE]/.test(text)) return pythonFloatRepr(Number(text));
  return text === '-0' ? '0' : text;
}

/**
 * Python's `repr(float)` (what json.dumps writes): the shortest round-trip digits, as JS has them too, laid out
 * fixed for decimal exponents -4 … 15 (with at least one fractional digit) and as `1e+16` / `1.5e-05` outside.
 */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const [mantissa, exponentText] = Math.abs(x).toExponential().split('e');
  const exponent = Number(exponentText);
  const digits = mantissa.replace('.', '');
  if (exponent < -4 || exponent >= 16) {
    const lead = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const expSign = exponent < 0 ? '-' : '+';
    return `${sign}${lead}e${expSign}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0');
  return `${sign}${whole}.${digits.slice(exponent + 1) || '0'}`;
}

/** Python's json string escaping; `ensureAscii` also escapes everything outside printable ASCII as \uXXXX. */
export function pythonJsonString(s: string, ensureAscii: boolean): string {
  // `[^ -\uffff]`: the UTF-16 units below the space, the control characters json escapes.
  const pattern = ensureAscii ? /["\\]|[^ -~]/g : /["\\]|[^ -\uffff]/g;
  return `"${s.replace(pattern, escapeChar)}"`;
}

const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};

function escapeChar(c: string): string {
  return SHORT_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}
