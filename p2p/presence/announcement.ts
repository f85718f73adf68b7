/**
 * The shape of a presence announcement. The swarm runtime supplies the content; p2p fills in who and when,
 * validates the shape and size on both ends, and never interprets roles or models.
 */
import { z } from 'zod';
import { PRESENCE_VERSION } from './constants.ts';

const ShortText = z.string().min(1).max(256);

export const HostedModel = z.looseObject({
  name: ShortText,
  /** Monotonic version of the policy weights currently served. */
  policyVersion: z.number().int().nonnegative(),
});

export const PresenceContent = z.object({
  roles: z.array(ShortText).max(16),
  models: z.array(HostedModel).max(64),
  pool: z.object({ load: z.number().nonnegative(), capacity: z.number().nonnegative() }),
  clientScripts: z.array(ShortText).max(256),
  gateway: z.looseObject({ available: z.boolean() }),
});
export type PresenceContent = z.infer<typeof PresenceContent>;

export const PresenceAnnouncement = PresenceContent.extend({
  v: z.literal(PRESENCE_VERSION),
  peerId: z.string().min(1).max(128),
  /** Sender's clock, ms since epoch; orders announcements from the same peer. */
  timestamp: z.number().int().nonnegative(),
});
export type PresenceAnnouncement = z.infer<typeof PresenceAnnouncement>;

/**
 * A peer's last word on a clean stop: receivers drop it at once instead of waiting for its expiry. Strict, so
 * that an announcement can never be read as a goodbye.
 */
export const PresenceGoodbye = z.strictObject({
  v: z.literal(PRESENCE_VERSION),
  peerId: z.string().min(1).max(128),
  timestamp: z.number().int().nonnegative(),
  leaving: z.literal(true),
});
export type PresenceGoodbye = z.infer<typeof PresenceGoodbye>;

/** Everything the presence topic carries. */
export const PresenceMessage = z.union([PresenceGoodbye, PresenceAnnouncement]);
export type PresenceMessage = z.infer<typeof PresenceMessage>;
