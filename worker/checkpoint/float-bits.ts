/**
 * Conversions between float32 and the 16-bit floats checkpoints are stored in, on raw bit patterns so that NaN
 * payloads, signed zeros and infinities survive. Narrowing rounds to nearest, ties to even, as PyTorch does.
 */

let f16ToF32Table: Uint32Array | null = null;

/** float16 bits → float32 bits, through a 64 K-entry table built on first use. */
export function f16BitsToF32Bits(half: number): number {
  f16ToF32Table ??= buildF16ToF32Table();
  return f16ToF32Table[half & 0xffff];
}

function buildF16ToF32Table(): Uint32Array {
  const table = new Uint32Array(1 << 16);
  const scratch = new Float32Array(1);
  const scratchBits = new Uint32Array(scratch.buffer);
  for (let half = 0; half < table.length; half++) {
    const sign = (half & 0x8000) << 16;
    const exponent = (half >> 10) & 0x1f;
    const mantissa = half & 0x3ff;
    if (exponent === 0x1f) {
      table[half] = sign | 0x7f800000 | (mantissa << 13); // Inf / NaN, payload kept
    } else if (exponent === 0) {
      scratch[0] = mantissa * 2 ** -24; // zero or subnormal: exact in float32
      table[half] = sign | scratchBits[0];
    } else {
      table[half] = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    }
  }
  return table;
}

/** float32 bits → float16 bits, rounding to nearest even; overflow becomes ±Inf. */
export function f32BitsToF16Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa === 0 ? 0 : 0x200 | (mantissa >>> 13)); // Inf, or a quiet NaN
  // float32 subnormals (and zero) are far below float16's smallest subnormal: they round to ±0.
  if (exponent === 0) return sign;
  const halfExponent = exponent - 127 + 15;
  // The 24-bit significand is shifted down to float16's 11 bits (normal) or fewer (subnormal).
  const shift = halfExponent >= 1 ? 13 : 14 - halfExponent;
  if (shift > 24) return sign;
  const significand = 0x800000 | mantissa;
  let rounded = significand >>> shift;
  const remainder = significand & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  if (remainder > halfway || (remainder === halfway && (rounded & 1) === 1)) rounded++;
  // Adding the biased exponent lets a carry out of the mantissa bump the exponent (and reach Inf) by itself.
  const magnitude = halfExponent >= 1 ? ((halfExponent - 1) << 10) + rounded : rounded;
  return sign | Math.min(magnitude, 0x7c00);
}

/** bfloat16 bits → float32 bits: bfloat16 is the top half of a float32. */
export function bf16BitsToF32Bits(half: number): number {
  return ((half & 0xffff) << 16) >>> 0;
}

/** float32 bits → bfloat16 bits, rounding to nearest even; NaN stays a (quiet) NaN. */
export function f32BitsToBf16Bits(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return ((bits >>> 16) | 0x40) & 0xffff;
  const roundingBias = 0x7fff + ((bits >>> 16) & 1);
  return ((bits + roundingBias) >>> 16) & 0xffff;
}
