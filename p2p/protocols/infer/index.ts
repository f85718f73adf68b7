/**
 * @packageDocumentation
 * `/agentjet/infer/1` — streamed inference between peers.
 *
 * ```ts
 * node.infer.handle(async (request, emit, signal) => { for await (const delta of generate(request, signal)) await emit(delta) })
 * for await (const frame of node.infer.request(serverPeerId, { model: 'tiny', messages })) …
 * ```
 */
export { InferProtocol, InferRequest } from './infer.ts';
export type { InferHandler, InferInit, InferContext } from './infer.ts';
export * from './constants.ts';
export * from './errors.ts';
