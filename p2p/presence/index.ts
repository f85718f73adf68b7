/**
 * @packageDocumentation
 * Presence: who is in the swarm and what each peer offers, over gossipsub `/agentjet/<swarm>/presence/1`.
 *
 * ```ts
 * await node.presence.setContent(() => ({ roles: ['server'], models: [{ name: 'tiny', policyVersion: 3 }],
 *   pool: { load: 1, capacity: 4 }, clientScripts: [], gateway: { available: true } }))
 * node.presence.on('join', (entry) => …); node.presence.list()
 * ```
 */
export { PresenceService } from './presence.ts';
export type { PresenceEntry, PresenceEvents, PresenceInit, PresenceLeave, PresenceLeaveReason } from './presence.ts';
export { PresenceAnnouncement, PresenceContent, PresenceGoodbye, PresenceMessage, HostedModel } from './announcement.ts';
export * from './constants.ts';
export * from './errors.ts';
