/**
 * The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length, a JSON
 * header `{ name: { dtype, shape, data_offsets: [begin, end] }, __metadata__?: { key: string } }`, then the raw
 * little-endian tensor bytes. Tensors are read into and written from float32.
 */
import type { NamedTensors } from '../common/engine.ts';
import { SafetensorsFormatError, TensorShapeError } from './errors.ts';
import { bf16BitsToF32Bits, f16BitsToF32Bits, f32BitsToBf16Bits, f32BitsToF16Bits } from './float-bits.ts';

export type SafetensorsDtype = 'F32' | 'F16' | 'BF16';

export interface SafetensorsTensor {
  /** The dtype the file stores; `data` is always float32. */
  dtype: SafetensorsDtype;
  shape: number[];
  data: Float32Array;
}

export interface ParsedSafetensors {
  tensors: Record<string, SafetensorsTensor>;
  metadata: Record<string, string>;
}

export interface SerializeOptions {
  dtype?: SafetensorsDtype;
  /** Goes to `__metadata__`; HF writes `{ format: 'pt' }`. */
  metadata?: Record<string, string>;
}

const BYTES_PER_ELEMENT: Record<SafetensorsDtype, number> = { F32: 4, F16: 2, BF16: 2 };
const HEADER_LENGTH_BYTES = 8;
/** The reference implementation refuses larger headers too; it keeps a corrupt length from allocating gigabytes. */
const MAX_HEADER_BYTES = 100_000_000;
/** The header is padded with spaces so that tensor data starts 8-byte aligned. */
const DATA_ALIGNMENT = 8;
const METADATA_KEY = '__metadata__';
const HOST_IS_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function parseSafetensors(bytes: Uint8Array): ParsedSafetensors {
  const { entries, metadata, dataStart } = parseSafetensorsHeader(bytes);
  const tensors: Record<string, SafetensorsTensor> = {};
  for (const entry of entries) {
    const begin = dataStart + entry.dataOffsets[0];
    const end = dataStart + entry.dataOffsets[1];
    tensors[entry.name] = {
      dtype: entry.dtype,
      shape: entry.shape,
      data: decodeTensorData(bytes.subarray(begin, end), entry.dtype),
    };
  }
  return { tensors, metadata };
}

export interface SafetensorsHeaderEntry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** Byte range relative to the start of the data section. */
  dataOffsets: [number, number];
}

/** Reads and checks the header only: every entry's dtype, shape and byte range. */
export function parseSafetensorsHeader(bytes: Uint8Array): {
  entries: SafetensorsHeaderEntry[];
  metadata: Record<string, string>;
  dataStart: number;
} {
  if (bytes.length < HEADER_LENGTH_BYTES)
    throw new SafetensorsFormatError(`file is ${bytes.length} bytes, shorter than the 8-byte header length`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = view.getUint32(0, true) + view.getUint32(4, true) * 2 ** 32;
  if (headerLength > MAX_HEADER_BYTES || headerLength > bytes.length - HEADER_LENGTH_BYTES) {
    throw new SafetensorsFormatError(
      `header length ${headerLength} runs past the end of the ${bytes.length}-byte file`,
    );
  }
  const dataStart = HEADER_LENGTH_BYTES + headerLength;
  const dataLength = bytes.length - dataStart;

  let header: unknown;
  try {
    header = JSON.parse(
      new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(HEADER_LENGTH_BYTES, dataStart)),
    );
  } catch (error) {
    throw new SafetensorsFormatError(`header is not valid UTF-8 JSON: ${(error as Error).message}`);
  }
  if (!isPlainObject(header)) throw new SafetensorsFormatError('header is not a JSON object');

  const entries: SafetensorsHeaderEntry[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(header)) {
    if (name === METADATA_KEY) {
      metadata = parseMetadata(value);
    } else {
      entries.push(parseEntry(name, value, dataLength));
    }
  }
  return { entries, metadata, dataStart };
}

function parseMetadata(value: unknown): Record<string, string> {
  if (!isPlainObject(value) || !Object.values(value).every((v) => typeof v === 'string')) {
    throw new SafetensorsFormatError('__metadata__ must map strings to strings');
  }
  return value as Record<string, string>;
}

function parseEntry(name: string, value: unknown, dataLength: number): SafetensorsHeaderEntry {
  if (!isPlainObject(value))
    throw new SafetensorsFormatError(`tensor ${name}: header entry is not an object`);
  const { dtype, shape, data_offsets: offsets } = value;
  if (typeof dtype !== 'string' || !(dtype in BYTES_PER_ELEMENT)) {
    // Not JSON.stringify / String of any value: a header field nested deep enough overflows the stack in both.
    const shown = typeof dtype === 'object' && dtype !== null ? (Array.isArray(dtype) ? 'an array' : 'an object') : String(dtype);
    throw new SafetensorsFormatError(
      `tensor ${name}: unsupported dtype ${typeof dtype === 'string' ? JSON.stringify(dtype) : shown} (supported: F32, F16, BF16)`,
      { tensor: name, dtype: shown },
    );
  }
  if (!Array.isArray(shape) || !shape.every(isNonNegativeInteger)) {
    throw new SafetensorsFormatError(`tensor ${name}: shape must be a list of non-negative integers`);
  }
  if (
    !Array.isArray(offsets) ||
    offsets.length !== 2 ||
    !offsets.every(isNonNegativeInteger) ||
    offsets[0] > offsets[1]
  ) {
    throw new SafetensorsFormatError(
      `tensor ${name}: data_offsets must be [begin, end] with 0 <= begin <= end`,
    );
  }
  if (offsets[1] > dataLength) {
    throw new SafetensorsFormatError(
      `tensor ${name}: data_offsets [${offsets.join(', ')}] run past the ${dataLength}-byte data section`,
    );
  }
  const typedDtype = dtype as SafetensorsDtype;
  const expectedBytes = elementCount(shape) * BYTES_PER_ELEMENT[typedDtype];
  if (offsets[1] - offsets[0] !== expectedBytes) {
    throw new SafetensorsFormatError(
      `tensor ${name}: ${offsets[1] - offsets[0]} bytes for shape [${shape.join(', ')}] in ${dtype}, expected ${expectedBytes}`,
    );
  }
  return { name, dtype: typedDtype, shape: [...shape], dataOffsets: [offsets[0], offsets[1]] };
}

function decodeTensorData(bytes: Uint8Array, dtype: SafetensorsDtype): Float32Array {
  if (dtype === 'F32') return new Float32Array(copyLittleEndianWords(bytes, 4).buffer);
  const halves = new Uint16Array(copyLittleEndianWords(bytes, 2).buffer);
  const widen = dtype === 'F16' ? f16BitsToF32Bits : bf16BitsToF32Bits;
  const bits = new Uint32Array(halves.length);
  for (let i = 0; i < halves.length; i++) bits[i] = widen(halves[i]);
  return new Float32Array(bits.buffer);
}

/** An aligned copy of little-endian words in host byte order (a no-op swap on little-endian hosts). */
function copyLittleEndianWords(bytes: Uint8Array, wordBytes: number): Uint8Array {
  // Not `bytes.slice()`: on a Node Buffer that is a view into a shared pool, not a copy.
  const copy = new Uint8Array(bytes);
  if (!HOST_IS_LITTLE_ENDIAN) {
    for (let i = 0; i < copy.length; i += wordBytes) copy.subarray(i, i + wordBytes).reverse();
  }
  return copy;
}

export function serializeSafetensors(tensors: NamedTensors, options: SerializeOptions = {}): Uint8Array {
  const dtype = options.dtype ?? 'F32';
  if (!(dtype in BYTES_PER_ELEMENT))
    throw new SafetensorsFormatError(
      `unsupported dtype ${JSON.stringify(dtype)} (supported: F32, F16, BF16)`,
    );
  const names = Object.keys(tensors).sort();

  const header: Record<string, unknown> = {};
  if (options.metadata && Object.keys(options.metadata).length > 0) header[METADATA_KEY] = options.metadata;
  let dataLength = 0;
  for (const name of names) {
    const { shape, data } = tensors[name];
    if (elementCount(shape) !== data.length) throw new TensorShapeError(name, shape, [data.length]);
    const byteLength = data.length * BYTES_PER_ELEMENT[dtype];
    header[name] = { dtype, shape, data_offsets: [dataLength, dataLength + byteLength] };
    dataLength += byteLength;
  }

  const headerJson = new TextEncoder().encode(JSON.stringify(header));
  const paddedHeaderLength = Math.ceil(headerJson.length / DATA_ALIGNMENT) * DATA_ALIGNMENT;
  const out = new Uint8Array(HEADER_LENGTH_BYTES + paddedHeaderLength + dataLength);
  const view = new DataView(out.buffer);
  view.setUint32(0, paddedHeaderLength % 2 ** 32, true);
  view.setUint32(4, Math.floor(paddedHeaderLength / 2 ** 32), true);
  out.set(headerJson, HEADER_LENGTH_BYTES);
  out.fill(0x20, HEADER_LENGTH_BYTES + headerJson.length, HEADER_LENGTH_BYTES + paddedHeaderLength);

  let offset = HEADER_LENGTH_BYTES + paddedHeaderLength;
  for (const name of names) {
    const encoded = encodeTensorData(tensors[name].data, dtype);
    out.set(encoded, offset);
    offset += encoded.length;
  }
  return out;
}

function encodeTensorData(data: Float32Array, dtype: SafetensorsDtype): Uint8Array {
  const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
  if (dtype === 'F32')
    return toLittleEndianBytes(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 4);
  const narrow = dtype === 'F16' ? f32BitsToF16Bits : f32BitsToBf16Bits;
  const halves = new Uint16Array(data.length);
  for (let i = 0; i < data.length; i++) halves[i] = narrow(bits[i]);
  return toLittleEndianBytes(new Uint8Array(halves.buffer), 2);
}

function toLittleEndianBytes(hostBytes: Uint8Array, wordBytes: number): Uint8Array {
  return HOST_IS_LITTLE_ENDIAN ? hostBytes : copyLittleEndianWords(hostBytes, wordBytes);
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((product, size) => product * size, 1);
}

function isNonNegativeInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
