/**
 * @packageDocumentation
 * The p2p layer of a peer: a libp2p node in a private swarm, presence, and four bounded protocols that carry
 * typed messages and byte streams for swarm/. It knows nothing about models, episodes or SQLite: swarm/
 * plugs in the handlers and supplies the presence content.
 *
 * ```ts
 * import '../p2p/polyfill.ts' // first, in the entry point
 * const { name, key, bootstrap } = parseSwarmToken(token)
 * const node = await createSwarmNode({ dataDir, swarm: { name, key }, bootstrap })
 * await node.presence.setContent(() => ({ roles, models, pool, clientScripts, gateway }))
 * node.infer.handle(async (request, emit, signal) => { … })
 * node.weights.onManifest(({ signed, provider }) => node.weights.fetch(signed, { providers: [provider], destPath }))
 * await node.stop()
 * ```
 */
export { createSwarmNode } from './node/node.ts';
export type { SwarmNode, SwarmNodeOptions, SwarmLibp2p } from './node/node.ts';
export { InvalidIdentityFileError, InvalidNodeOptionsError } from './node/errors.ts';
export { SwarmKeyMismatchError, type SwarmKeyMismatch } from './node/swarm-key-check.ts';
export { createSwarmToken, parseSwarmToken, generateSwarmKey, SWARM_TOKEN_PREFIX } from './swarm-token/token.ts';
export type { SwarmToken, SwarmSecret } from './swarm-token/token.ts';
export { InvalidSwarmTokenError } from './swarm-token/errors.ts';

export * from './presence/index.ts';
export * from './protocols/infer/index.ts';
export * from './protocols/episode/index.ts';
export * from './protocols/trajectories/index.ts';
export * from './protocols/weights/index.ts';
export { ViolationTracker } from './protocols/shared/violations.ts';
export {
  FrameTooLargeError,
  InvalidFrameError,
  ReadTimeoutError,
  RemoteError,
  StreamAbortedError,
  UnexpectedEndOfStreamError,
} from './framing/errors.ts';
