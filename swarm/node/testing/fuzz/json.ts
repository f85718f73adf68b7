/**
 * JSON for fuzzing: values that are valid in shape, then mutated the way broken or hostile clients mutate them
 * (a field of the wrong type, a key dropped or added, nesting past any honest depth, unicode, numbers JSON.parse
 * turns into Infinity or loses precision on), and text that is not quite JSON at all. Pure fast-check arbitraries.
 */
import fc from 'fast-check';

/** A piece of JSON text written out as it is: numbers JSON.stringify cannot produce (1e999, -0.0, 1E-400). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** Beyond the peer's nesting cap (64, http/respond.ts) and near the depth that overflows a recursive walk. */
export const DEEP_NESTING_LEVELS = [63, 64, 65, 200, 10_000] as const;
/** A string long enough to pass every field's max length and most body limits' first check, but not a memory test. */
export const LONG_STRING_CHARS = 70_000;

/** JSON.stringify with RawJson pieces spliced in. */
export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : toJsonText(v))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const parts = Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => `${JSON.stringify(k)}:${toJsonText(v)}`);
    return `{${parts.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const oddNumbers = fc.constantFrom(
  new RawJson('1e999'),
  new RawJson('-1e999'),
  new RawJson('-0'),
  new RawJson('1E-400'),
  new RawJson('123456789012345678901234567890'),
  new RawJson('0.30000000000000004'),
  new RawJson('9007199254740993'),
  -1,
  0,
  0.5,
  2 ** 31,
  2 ** 53,
  -(2 ** 63),
  Number.MAX_VALUE,
  Number.MIN_VALUE,
);

export const unicodeString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('', ' ', '\u0000', '\uFEFF', '\uD800', '\uDFFF\uD800', '😀'.repeat(20), 'e\u0301', '\u202Eevil', '<|im_end|>', '<tool_call>', '../../etc/passwd', '%00', '${x}', "'; DROP TABLE episodes;--"),
  fc.string({ unit: 'grapheme-ascii', maxLength: 20 }),
);

const deep = fc.constantFrom(...DEEP_NESTING_LEVELS).chain((levels) =>
  fc.constantFrom(new RawJson('['.repeat(levels) + ']'.repeat(levels)), new RawJson('{"a":'.repeat(levels) + '1' + '}'.repeat(levels))),
);

/** A value of some JSON type, weighted towards the awkward ones. */
export const weirdValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constantFrom(null, true, false, [], {}, '', 0), weight: 3 },
  { arbitrary: oddNumbers, weight: 3 },
  { arbitrary: unicodeString, weight: 3 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 3 },
  { arbitrary: deep, weight: 1 },
  { arbitrary: fc.constant('x'.repeat(LONG_STRING_CHARS)), weight: 1 },
  { arbitrary: fc.array(fc.constant(0), { minLength: 1000, maxLength: 1000 }), weight: 1 },
);

type Path = (string | number)[];

function paths(value: unknown, prefix: Path = []): Path[] {
  const out: Path[] = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (value !== null && typeof value === 'object' && !(value instanceof RawJson)) {
    for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...prefix, k]));
  }
  return out;
}

function setAt(value: unknown, path: Path, replace: (old: unknown) => unknown): unknown {
  if (path.length === 0) return replace(value);
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((v, i) => (i === head ? setAt(v, rest, replace) : v));
  const obj = value as Record<string, unknown>;
  return { ...obj, [head]: setAt(obj[head], rest, replace) };
}

/** Marks a deleted key or element; dropped when the value is written out. */
const DELETED = undefined;

type Mutation =
  | { op: 'replace'; at: number; with: unknown }
  | { op: 'delete'; at: number }
  | { op: 'extraKey'; at: number; key: string; with: unknown }
  | { op: 'wrap'; at: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('replace' as const), at: fc.nat(), with: weirdValue }), weight: 5 },
  { arbitrary: fc.record({ op: fc.constant('delete' as const), at: fc.nat() }), weight: 2 },
  {
    arbitrary: fc.record({
      op: fc.constant('extraKey' as const),
      at: fc.nat(),
      key: fc.oneof(unicodeString, fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString')),
      with: weirdValue,
    }),
    weight: 2,
  },
  { arbitrary: fc.record({ op: fc.constant('wrap' as const), at: fc.nat() }), weight: 1 },
);

function applyMutation(value: unknown, m: Mutation): unknown {
  const all = paths(value);
  const path = all[m.at % all.length];
  switch (m.op) {
    case 'replace':
      return setAt(value, path, () => m.with);
    case 'delete':
      return path.length === 0 ? {} : setAt(value, path, () => DELETED);
    case 'extraKey':
      return setAt(value, path, (old) =>
        old !== null && typeof old === 'object' && !Array.isArray(old) && !(old instanceof RawJson)
          ? // defineProperty, not assignment: a "__proto__" key must be an own key of the JSON, as a client sends it.
            Object.defineProperty({ ...old }, m.key, { value: m.with, enumerable: true })
          : old,
      );
    case 'wrap':
      return setAt(value, path, (old) => [old]);
  }
}

/** `valid`, mutated 1–3 times at structure-aware places. */
export function mutated<T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc.tuple(valid, fc.array(mutation, { minLength: 1, maxLength: 3 })).map(([value, ms]) => ms.reduce<unknown>(applyMutation, value));
}

/** Text-level damage to a JSON body: truncated, a byte flipped, invalid UTF-8, a BOM, trailing garbage. */
const textDamage = fc.oneof(
  fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('flip' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ op: fc.constant('prefix' as const), text: fc.constantFrom('\uFEFF', ' \n', 'null', ')]}\'\n') }),
  fc.record({ op: fc.constant('suffix' as const), text: fc.constantFrom('}', ',', ' garbage', '\u0000', '{"a":1}') }),
);

export function damagedText(valid: fc.Arbitrary<unknown>): fc.Arbitrary<Buffer> {
  return fc.tuple(valid, textDamage).map(([value, d]) => {
    const bytes = Buffer.from(toJsonText(value), 'utf8');
    switch (d.op) {
      case 'truncate':
        return bytes.subarray(0, d.at % Math.max(1, bytes.length));
      case 'flip': {
        const copy = Buffer.from(bytes);
        if (copy.length > 0) copy[d.at % copy.length] = d.byte;
        return copy;
      }
      case 'prefix':
        return Buffer.concat([Buffer.from(d.text, 'utf8'), bytes]);
      case 'suffix':
        return Buffer.concat([bytes, Buffer.from(d.text, 'utf8')]);
    }
  });
}

/**
 * A JSON body for a route: valid, mutated, damaged as text, or not an object at all. `sanitize` runs on the value
 * before it is written out (the suite's bounds: requests.ts says which and why).
 */
export function jsonBody(valid: fc.Arbitrary<unknown>, sanitize: (v: unknown) => unknown = (v) => v): fc.Arbitrary<{ body: Buffer; mutation: string }> {
  const text = (v: unknown) => Buffer.from(toJsonText(sanitize(v)));
  return fc.oneof(
    { arbitrary: valid.map((v) => ({ body: text(v), mutation: 'valid' })), weight: 2 },
    { arbitrary: mutated(valid).map((v) => ({ body: text(v), mutation: 'mutated' })), weight: 6 },
    { arbitrary: damagedText(valid.map(sanitize)).map((b) => ({ body: b, mutation: 'damaged-text' })), weight: 2 },
    { arbitrary: weirdValue.map((v) => ({ body: text(v), mutation: 'not-an-object' })), weight: 1 },
    { arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => ({ body: Buffer.from(b), mutation: 'random-bytes' })), weight: 1 },
  );
}
