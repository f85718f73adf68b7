/** The node's key file exists but cannot be read as a libp2p private key. */
export class InvalidIdentityFileError extends Error {
  override name = 'InvalidIdentityFileError';
}

/** createSwarmNode was given options it cannot use (bad listen address, bad allow-list entry, …). */
export class InvalidNodeOptionsError extends Error {
  override name = 'InvalidNodeOptionsError';
}
