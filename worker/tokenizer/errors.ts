/** Errors raised by tokenizers and chat templates. Each has a stable `name` that crosses thread boundaries. */

/** A token id outside the vocabulary was asked to be decoded or spelled. */
export class InvalidTokenIdError extends Error {
  override name = 'InvalidTokenIdError';
  constructor(readonly tokenId: number) {
    super(`token id ${tokenId} is not in the vocabulary`);
  }
}

/** tokenizer.json / tokenizer_config.json is missing, unparsable or not understood. */
export class TokenizerLoadError extends Error {
  override name = 'TokenizerLoadError';
  constructor(
    message: string,
    readonly file?: string,
  ) {
    super(message);
  }
}

/** The chat template could not be compiled or failed while rendering a conversation. */
export class ChatTemplateError extends Error {
  override name = 'ChatTemplateError';
}
