export { InvalidRequestError, UnsupportedVersionError } from '../shared/errors.ts';

/** The manifest's signature does not verify with the public key of the peer id that claims to have signed it. */
export class ManifestSignatureError extends Error {
  override name = 'ManifestSignatureError';
}

/** The manifest is not self-consistent (chunk sizes, indices, totals) or not valid JSON of the right shape. */
export class InvalidManifestError extends Error {
  override name = 'InvalidManifestError';
}

/** A chunk's bytes did not hash to the manifest's sha256 for that chunk. */
export class ChunkHashMismatchError extends Error {
  override name = 'ChunkHashMismatchError';
}

/** The provider does not serve this model version. */
export class UnknownBlobError extends Error {
  override name = 'UnknownBlobError';
}

/** No provider left that could deliver the missing chunks. */
export class NoProviderError extends Error {
  override name = 'NoProviderError';
}

/** A record on the direct channel did not authenticate (wrong key, tampered or truncated bytes). */
export class SealedRecordError extends Error {
  override name = 'SealedRecordError';
}

/** The direct channel cannot be used (the provider offers none, or its endpoint is unreachable): use the libp2p stream. */
export class DirectChannelUnavailableError extends Error {
  override name = 'DirectChannelUnavailableError';
}

/** The direct channel's worker thread died (crashed or was stopped): its sessions fail, fetchers use the libp2p stream. */
export class DirectThreadError extends Error {
  override name = 'DirectThreadError';
}
