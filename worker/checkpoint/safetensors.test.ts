import { describe, expect, it } from 'vitest';
import { bf16BitsToF32Bits, f16BitsToF32Bits, f32BitsToBf16Bits, f32BitsToF16Bits } from './float-bits.ts';
import { parseSafetensors, serializeSafetensors } from './safetensors.ts';

function bitsOf(values: Float32Array): number[] {
  return [...new Uint32Array(values.buffer, values.byteOffset, values.length)];
}

function floatFromBits(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0];
}

function bitsFromFloat(value: number): number {
  return new Uint32Array(new Float32Array([value]).buffer)[0];
}

/** A file made by hand, to check that the reader follows the format and not just our writer. */
function handMadeFile(header: unknown, dataBytes: number, rawHeader?: string): Uint8Array {
  const json = new TextEncoder().encode(rawHeader ?? JSON.stringify(header));
  const file = new Uint8Array(8 + json.length + dataBytes);
  new DataView(file.buffer).setUint32(0, json.length, true);
  file.set(json, 8);
  return file;
}

const expectFormatError = (fn: () => unknown) =>
  expect(fn).toThrow(expect.objectContaining({ name: 'SafetensorsFormatError' }));

describe('safetensors F32', () => {
  it('round-trips float32 bit for bit, special values and metadata included', () => {
    const nanWithPayload = floatFromBits(0x7fc01234);
    const data = new Float32Array([
      0,
      -0,
      1.5,
      -3.25e-7,
      1e-45,
      Infinity,
      -Infinity,
      nanWithPayload,
      Math.PI,
    ]);
    const bytes = serializeSafetensors(
      { 'model.embed.weight': { shape: [3, 3], data }, bias: { shape: [2], data: new Float32Array([7, 8]) } },
      { metadata: { format: 'pt' } },
    );
    const parsed = parseSafetensors(bytes);
    expect(parsed.metadata).toEqual({ format: 'pt' });
    expect(parsed.tensors['model.embed.weight'].shape).toEqual([3, 3]);
    expect(parsed.tensors['model.embed.weight'].dtype).toBe('F32');
    expect(bitsOf(parsed.tensors['model.embed.weight'].data)).toEqual(bitsOf(data));
    expect([...parsed.tensors.bias.data]).toEqual([7, 8]);
  });

  it('writes the layout the format specifies: u64 LE header length, space-padded JSON, aligned data', () => {
    const bytes = serializeSafetensors({ w: { shape: [2], data: new Float32Array([1, 2]) } });
    const headerLength = new DataView(bytes.buffer).getUint32(0, true);
    expect(new DataView(bytes.buffer).getUint32(4, true)).toBe(0);
    expect((8 + headerLength) % 8).toBe(0);
    const header = new TextDecoder().decode(bytes.subarray(8, 8 + headerLength));
    expect(JSON.parse(header)).toEqual({ w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } });
    expect(header).toMatch(/^\{.*\} *$/);
    expect(bytes.length).toBe(8 + headerLength + 8);
    expect([...new Float32Array(bytes.slice(8 + headerLength).buffer)]).toEqual([1, 2]);
  });

  it('reads a scalar and an empty tensor', () => {
    const bytes = serializeSafetensors({
      scalar: { shape: [], data: new Float32Array([42]) },
      empty: { shape: [0, 4], data: new Float32Array(0) },
    });
    const { tensors } = parseSafetensors(bytes);
    expect(tensors.scalar).toMatchObject({ shape: [] });
    expect([...tensors.scalar.data]).toEqual([42]);
    expect(tensors.empty.data.length).toBe(0);
  });

  it('refuses a tensor whose data does not fill its shape', () => {
    expect(() => serializeSafetensors({ w: { shape: [2, 2], data: new Float32Array(3) } })).toThrow(
      expect.objectContaining({ name: 'TensorShapeError' }),
    );
  });
});

describe('safetensors F16', () => {
  it('stores representable values exactly', () => {
    const values = [
      0,
      -0,
      1,
      -2,
      0.5,
      1.5,
      3.140625,
      65504,
      -65504,
      2 ** -24,
      2 ** -14,
      1023 * 2 ** -24,
      Infinity,
      -Infinity,
    ];
    const data = new Float32Array(values);
    const parsed = parseSafetensors(
      serializeSafetensors({ h: { shape: [values.length], data } }, { dtype: 'F16' }),
    );
    expect(parsed.tensors.h.dtype).toBe('F16');
    expect(bitsOf(parsed.tensors.h.data)).toEqual(bitsOf(data));
  });

  it('rounds to nearest, ties to even, overflowing to infinity and underflowing to zero', () => {
    const cases: [number, number][] = [
      [1 + 2 ** -11, 1], // halfway, 1 is even
      [1 + 3 * 2 ** -11, 1 + 2 ** -9], // halfway, the upper neighbour is even
      [1 + 2 ** -11 + 2 ** -20, 1 + 2 ** -10], // just above halfway
      [65519, 65504],
      [65520, Infinity], // halfway to 2^16, which is even and overflows
      [2 ** -25, 0], // halfway between 0 and the smallest subnormal
      [1.5 * 2 ** -25, 2 ** -24],
      [3 * 2 ** -25, 2 ** -23], // subnormal tie to even
      [1e-10, 0],
      [-1e6, -Infinity],
    ];
    const data = new Float32Array(cases.map(([input]) => input));
    const { tensors } = parseSafetensors(
      serializeSafetensors({ h: { shape: [cases.length], data } }, { dtype: 'F16' }),
    );
    expect([...tensors.h.data]).toEqual(cases.map(([, rounded]) => rounded));
    expect(
      Number.isNaN(
        parseSafetensors(
          serializeSafetensors({ n: { shape: [1], data: new Float32Array([NaN]) } }, { dtype: 'F16' }),
        ).tensors.n.data[0],
      ),
    ).toBe(true);
  });

  it('round-trips every non-NaN float16 bit pattern, and rounds every midpoint to the even neighbour', () => {
    const wrong: string[] = [];
    for (let half = 0; half < 0x10000; half++) {
      const isNaN = (half & 0x7c00) === 0x7c00 && (half & 0x3ff) !== 0;
      if (!isNaN && f32BitsToF16Bits(f16BitsToF32Bits(half)) !== half)
        wrong.push(`round trip of 0x${half.toString(16)}`);
    }
    // Midpoints between consecutive positive finite halves (subnormals included) are exact in float32.
    for (let half = 0; half < 0x7bff; half++) {
      const midpoint =
        (floatFromBits(f16BitsToF32Bits(half)) + floatFromBits(f16BitsToF32Bits(half + 1))) / 2;
      const even = half % 2 === 0 ? half : half + 1;
      if (f32BitsToF16Bits(bitsFromFloat(midpoint)) !== even)
        wrong.push(`midpoint after 0x${half.toString(16)}`);
    }
    expect(wrong).toEqual([]);
  });
});

describe('safetensors BF16', () => {
  it('stores representable values exactly and rounds the rest to nearest even', () => {
    const exact = [0, -0, 1, -2, 0.15625, 3.3895313892515355e38, Infinity, -Infinity];
    const rounded: [number, number][] = [
      [1 + 2 ** -8, 1],
      [1 + 3 * 2 ** -8, 1 + 2 ** -6],
      [1 + 2 ** -8 + 2 ** -20, 1 + 2 ** -7],
      [3.4e38, Infinity],
    ];
    const data = new Float32Array([...exact, ...rounded.map(([input]) => input)]);
    const { tensors } = parseSafetensors(
      serializeSafetensors({ b: { shape: [data.length], data } }, { dtype: 'BF16' }),
    );
    expect(tensors.b.dtype).toBe('BF16');
    expect(bitsOf(tensors.b.data.subarray(0, exact.length))).toEqual(bitsOf(new Float32Array(exact)));
    expect([...tensors.b.data.subarray(exact.length)]).toEqual(rounded.map(([, r]) => r));
  });

  it('round-trips every non-NaN bfloat16 bit pattern and keeps NaN a NaN', () => {
    const wrong: number[] = [];
    for (let half = 0; half < 0x10000; half++) {
      const isNaN = (half & 0x7f80) === 0x7f80 && (half & 0x7f) !== 0;
      const back = f32BitsToBf16Bits(bf16BitsToF32Bits(half));
      const ok = isNaN ? (back & 0x7f80) === 0x7f80 && (back & 0x7f) !== 0 : back === half;
      if (!ok) wrong.push(half);
    }
    expect(wrong).toEqual([]);
  });
});

describe('malformed safetensors', () => {
  it('rejects a file too short for the header length', () => {
    expectFormatError(() => parseSafetensors(new Uint8Array(5)));
  });

  it('rejects a header length past the end of the file', () => {
    const file = handMadeFile({}, 0);
    new DataView(file.buffer).setUint32(0, 1000, true);
    expectFormatError(() => parseSafetensors(file));
  });

  it('rejects a header that is not JSON, or not an object', () => {
    expectFormatError(() => parseSafetensors(handMadeFile(null, 0, '{"w": {"dtype": ')));
    expectFormatError(() => parseSafetensors(handMadeFile([1, 2], 0)));
  });

  it('rejects data offsets out of range', () => {
    expectFormatError(() =>
      parseSafetensors(handMadeFile({ w: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }, 8)),
    );
    expectFormatError(() =>
      parseSafetensors(handMadeFile({ w: { dtype: 'F32', shape: [1], data_offsets: [8, 4] } }, 8)),
    );
  });

  it('rejects offsets that do not match the shape', () => {
    expectFormatError(() =>
      parseSafetensors(handMadeFile({ w: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8)),
    );
  });

  it('rejects an unsupported dtype, naming it', () => {
    let error: unknown;
    try {
      parseSafetensors(handMadeFile({ ids: { dtype: 'I64', shape: [1], data_offsets: [0, 8] } }, 8));
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ name: 'SafetensorsFormatError', detail: { tensor: 'ids', dtype: 'I64' } });
  });

  it('rejects metadata that is not string to string', () => {
    expectFormatError(() => parseSafetensors(handMadeFile({ __metadata__: { step: 3 } }, 0)));
  });

  it('reads from a Node Buffer that is a view into a larger pool', () => {
    const file = serializeSafetensors(
      { w: { shape: [2], data: new Float32Array([1.25, -4]) } },
      { dtype: 'BF16' },
    );
    const pool = Buffer.alloc(file.length + 13, 0xee);
    file.forEach((byte, i) => (pool[5 + i] = byte));
    const { tensors } = parseSafetensors(pool.subarray(5, 5 + file.length));
    expect([...tensors.w.data]).toEqual([1.25, -4]);
  });

  it('reads a hand-made file with unaligned data', () => {
    // A 1-byte pad before the data makes the float32 words start at an odd address.
    const file = handMadeFile({ w: { dtype: 'F32', shape: [1], data_offsets: [1, 5] } }, 5);
    new DataView(file.buffer).setFloat32(file.length - 4, 2.5, true);
    expect([...parseSafetensors(file).tensors.w.data]).toEqual([2.5]);
  });
});
