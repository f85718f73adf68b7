/** The string is not a swarm token this version can read (wrong prefix, bad encoding, bad fields). */
export class InvalidSwarmTokenError extends Error {
  override name = 'InvalidSwarmTokenError';
}
