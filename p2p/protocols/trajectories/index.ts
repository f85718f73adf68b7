/**
 * @packageDocumentation
 * `/agentjet/trajectories/1` — fetch episodes' trajectories as a stream of JSON records, deduplicated by id.
 *
 * ```ts
 * node.trajectories.handle(async (ids, emit) => { for (const t of store.trajectories(ids)) await emit(t) })
 * for await (const record of node.trajectories.fetch([peerA, peerB], ids)) …
 * ```
 */
export { TrajectoriesProtocol, TrajectoriesRequest, TrajectoryRecord } from './trajectories.ts';
export type { TrajectoriesHandler, TrajectoriesInit } from './trajectories.ts';
export * from './constants.ts';
export * from './errors.ts';
