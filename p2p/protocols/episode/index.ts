/**
 * @packageDocumentation
 * `/agentjet/episode/1` — request/response JSON RPC for episode begin / end / abort.
 *
 * ```ts
 * node.episode.handle(async (message, { peerId }) => runtime.onEpisodeMessage(peerId, message))
 * const answer = await node.episode.request(serverPeerId, { type: 'begin', task: 'x' })
 * ```
 */
export { EpisodeProtocol, EpisodeMessage } from './episode.ts';
export type { EpisodeHandler, EpisodeInit } from './episode.ts';
export * from './constants.ts';
export * from './errors.ts';
