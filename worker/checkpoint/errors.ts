/** Errors raised while reading or writing checkpoints. Each has a stable `name` that crosses thread boundaries. */

/** A safetensors file is malformed: bad header, offsets out of range, an unsupported dtype … */
export class SafetensorsFormatError extends Error {
  override name = 'SafetensorsFormatError';
  constructor(
    message: string,
    /** What the file got wrong, where it is one field (a tensor's dtype, say): for callers and tests, not prose. */
    readonly detail: { tensor?: string; dtype?: string } = {},
  ) {
    super(message);
  }
}

/** config.json (or adapter_config.json) lacks a field, has one of the wrong type, or describes an unsupported model. */
export class ModelConfigError extends Error {
  override name = 'ModelConfigError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/** The checkpoint lacks a tensor the model needs. */
export class MissingTensorError extends Error {
  override name = 'MissingTensorError';
  constructor(
    readonly tensorName: string,
    /** The file that should hold it, when an index names one. */
    readonly file?: string,
  ) {
    super(`tensor ${tensorName} is missing from ${file ?? 'the checkpoint'}`);
  }
}

/** A tensor's shape (or its data length) is not what the model expects. */
export class TensorShapeError extends Error {
  override name = 'TensorShapeError';
  constructor(
    readonly tensorName: string,
    readonly expected: readonly number[],
    readonly actual: readonly number[],
  ) {
    super(`tensor ${tensorName} has shape [${actual.join(', ')}], expected [${expected.join(', ')}]`);
  }
}

/** A model folder is missing a file, or its files do not fit together (index without shards …). */
export class ModelFolderError extends Error {
  override name = 'ModelFolderError';
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
  }
}
