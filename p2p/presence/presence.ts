/**
 * Presence over gossipsub: every peer periodically publishes what it offers, and every peer keeps a table of
 * the others, dropping a peer it has not heard from for `ttlMs`, or at once when it says goodbye (a clean stop).
 * Listeners hear join / update / leave.
 */
import type { PeerId } from '@libp2p/interface';
import type { GossipSub, Message } from '@libp2p/gossipsub';
import { TopicValidatorResult } from '@libp2p/gossipsub';
import { decodeJsonFrame } from '../framing/frames.ts';
import type { ViolationTracker } from '../protocols/shared/violations.ts';
import type { PresenceContent } from './announcement.ts';
import { PresenceAnnouncement, PresenceMessage } from './announcement.ts';
import type { PresenceGoodbye } from './announcement.ts';
import {
  ANNOUNCE_DEBOUNCE_MS,
  DEFAULT_PRESENCE_INTERVAL_MS,
  GOODBYE_TIMEOUT_MS,
  MAX_PRESENCE_BYTES,
  PRESENCE_TTL_INTERVALS,
  PRESENCE_VERSION,
  REMEMBERED_GOODBYES,
  presenceTopic,
} from './constants.ts';
import { InvalidPresenceAnnouncementError } from './errors.ts';

export interface PresenceEntry {
  peerId: string;
  announcement: PresenceAnnouncement;
  /** Local clock (ms) when the latest announcement arrived. */
  lastSeen: number;
}

/** 'goodbye': the peer announced a clean stop; 'expired': it went silent for the TTL (crash, network). */
export type PresenceLeaveReason = 'goodbye' | 'expired';

export interface PresenceLeave extends PresenceEntry {
  reason: PresenceLeaveReason;
}

export interface PresenceEvents {
  join: PresenceEntry;
  update: PresenceEntry;
  leave: PresenceLeave;
}

export interface PresenceInit {
  intervalMs?: number;
  ttlMs?: number;
}

export interface PresenceComponents {
  peerId: PeerId;
  pubsub: GossipSub;
  violations: ViolationTracker;
  swarmName: string;
}

type Listener<T> = (value: T) => void;

export class PresenceService {
  readonly topic: string;
  readonly intervalMs: number;
  readonly ttlMs: number;
  private readonly peers = new Map<string, PresenceEntry>();
  /** peerId → timestamp of its goodbye: announcements it sent before leaving are stale. */
  private readonly goodbyes = new Map<string, number>();
  private readonly listeners: { [K in keyof PresenceEvents]: Set<Listener<PresenceEvents[K]>> } = {
    join: new Set(),
    update: new Set(),
    leave: new Set(),
  };
  private content?: () => PresenceContent | Promise<PresenceContent>;
  private announceTimer?: NodeJS.Timeout;
  private sweepTimer?: NodeJS.Timeout;
  private debounceTimer?: NodeJS.Timeout;
  private started = false;

  constructor(
    private readonly components: PresenceComponents,
    init: PresenceInit = {},
  ) {
    this.topic = presenceTopic(components.swarmName);
    this.intervalMs = init.intervalMs ?? DEFAULT_PRESENCE_INTERVAL_MS;
    this.ttlMs = init.ttlMs ?? this.intervalMs * PRESENCE_TTL_INTERVALS;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    const { pubsub } = this.components;
    pubsub.topicValidators.set(this.topic, this.validate);
    pubsub.addEventListener('message', this.onMessage);
    pubsub.addEventListener('subscription-change', this.onSubscriptionChange);
    pubsub.subscribe(this.topic);
    this.announceTimer = setInterval(() => this.announceQuietly(), this.intervalMs);
    this.sweepTimer = setInterval(() => this.expireStale(), Math.max(50, Math.min(this.intervalMs, this.ttlMs / 2)));
  }

  /**
   * Say goodbye (a clean stop), so that the others drop this peer at once instead of after the TTL. Waits at
   * most `timeoutMs` for the message to be handed to the connections; failures are ignored (the TTL remains).
   */
  async leave(timeoutMs = GOODBYE_TIMEOUT_MS): Promise<void> {
    if (!this.started) return;
    const goodbye: PresenceGoodbye = {
      v: PRESENCE_VERSION,
      peerId: this.components.peerId.toString(),
      timestamp: Date.now(),
      leaving: true,
    };
    const bytes = new TextEncoder().encode(JSON.stringify(goodbye));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    try {
      await Promise.race([this.components.pubsub.publish(this.topic, bytes).catch(() => undefined), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  stop(): void {
    if (!this.started) return;
    this.started = false;
    clearInterval(this.announceTimer);
    clearInterval(this.sweepTimer);
    clearTimeout(this.debounceTimer);
    const { pubsub } = this.components;
    pubsub.removeEventListener('message', this.onMessage);
    pubsub.removeEventListener('subscription-change', this.onSubscriptionChange);
    pubsub.topicValidators.delete(this.topic);
    try {
      pubsub.unsubscribe(this.topic);
    } catch {
      // gossipsub may already be stopped with the node.
    }
  }

  /**
   * Supply what this peer announces (called before every announcement). Validated now and at each call;
   * an invalid announcement throws InvalidPresenceAnnouncementError here and is skipped later.
   */
  async setContent(provider: () => PresenceContent | Promise<PresenceContent>): Promise<void> {
    this.content = provider;
    await this.announceNow();
  }

  /** Publish at once (e.g. after a new policy version), instead of waiting for the next interval. */
  async announceNow(): Promise<void> {
    if (!this.started || !this.content) return;
    const bytes = this.encode(await this.content());
    try {
      await this.components.pubsub.publish(this.topic, bytes);
    } catch {
      // No peer yet or a duplicate: the next interval retries.
    }
  }

  /** Timer-driven announcements: an invalid content was already reported to setContent's caller. */
  private announceQuietly(): void {
    this.announceNow().catch(() => {});
  }

  /** The peers heard from within the TTL (this peer excluded). */
  list(): PresenceEntry[] {
    return [...this.peers.values()];
  }

  get(peerId: string): PresenceEntry | undefined {
    return this.peers.get(peerId);
  }

  on<K extends keyof PresenceEvents>(event: K, listener: Listener<PresenceEvents[K]>): () => void {
    this.listeners[event].add(listener);
    return () => this.listeners[event].delete(listener);
  }

  private encode(content: PresenceContent): Uint8Array {
    const announcement = {
      ...content,
      v: PRESENCE_VERSION,
      peerId: this.components.peerId.toString(),
      timestamp: Date.now(),
    };
    const parsed = PresenceAnnouncement.safeParse(announcement);
    if (!parsed.success) throw new InvalidPresenceAnnouncementError(parsed.error.issues[0]?.message ?? 'invalid announcement');
    const bytes = new TextEncoder().encode(JSON.stringify(parsed.data));
    if (bytes.byteLength > MAX_PRESENCE_BYTES) {
      throw new InvalidPresenceAnnouncementError(`announcement of ${bytes.byteLength} bytes exceeds ${MAX_PRESENCE_BYTES}`);
    }
    return bytes;
  }

  /** Gossipsub validator: invalid announcements are rejected (not forwarded) and count against the sender. */
  private readonly validate = (source: PeerId, message: Message): TopicValidatorResult => {
    if (this.decode(message)) return TopicValidatorResult.Accept;
    this.components.violations.record(source, new InvalidPresenceAnnouncementError('invalid presence announcement'));
    return TopicValidatorResult.Reject;
  };

  private decode(message: Message): PresenceMessage | undefined {
    if (message.type !== 'signed' || message.data.byteLength > MAX_PRESENCE_BYTES) return undefined;
    try {
      const decoded = decodeJsonFrame(message.data, PresenceMessage);
      // The signer must be the peer the message speaks for: nobody can say goodbye for another.
      return decoded.peerId === message.from.toString() ? decoded : undefined;
    } catch {
      return undefined;
    }
  }

  private readonly onMessage = (event: CustomEvent<Message>): void => {
    if (event.detail.topic !== this.topic) return;
    const decoded = this.decode(event.detail);
    if (!decoded || decoded.peerId === this.components.peerId.toString()) return;
    if ('leaving' in decoded) {
      this.onGoodbye(decoded);
      return;
    }
    const announcement = decoded;
    const previous = this.peers.get(announcement.peerId);
    if (previous && previous.announcement.timestamp > announcement.timestamp) return;
    const saidGoodbyeAt = this.goodbyes.get(announcement.peerId);
    if (saidGoodbyeAt !== undefined) {
      // Sent before its goodbye and delivered late: it stays gone. A newer one means it is back (a restart).
      if (announcement.timestamp <= saidGoodbyeAt) return;
      this.goodbyes.delete(announcement.peerId);
    }
    const entry: PresenceEntry = { peerId: announcement.peerId, announcement, lastSeen: Date.now() };
    this.peers.set(entry.peerId, entry);
    this.emit(previous ? 'update' : 'join', entry);
  };

  private onGoodbye(goodbye: PresenceGoodbye): void {
    const entry = this.peers.get(goodbye.peerId);
    if (entry && entry.announcement.timestamp > goodbye.timestamp) return;
    this.goodbyes.delete(goodbye.peerId);
    this.goodbyes.set(goodbye.peerId, goodbye.timestamp);
    if (this.goodbyes.size > REMEMBERED_GOODBYES) this.goodbyes.delete(this.goodbyes.keys().next().value!);
    if (!entry) return;
    this.peers.delete(goodbye.peerId);
    this.emit('leave', { ...entry, reason: 'goodbye' });
  }

  /** A peer just joined the topic: announce soon so that it learns about us without waiting an interval. */
  private readonly onSubscriptionChange = (event: CustomEvent<{ subscriptions: Array<{ topic: string; subscribe: boolean }> }>): void => {
    if (!event.detail.subscriptions.some((s) => s.topic === this.topic && s.subscribe)) return;
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => this.announceQuietly(), ANNOUNCE_DEBOUNCE_MS);
  };

  private expireStale(): void {
    const now = Date.now();
    for (const entry of this.peers.values()) {
      if (now - entry.lastSeen <= this.ttlMs) continue;
      this.peers.delete(entry.peerId);
      this.emit('leave', { ...entry, reason: 'expired' });
    }
  }

  private emit<K extends keyof PresenceEvents>(event: K, value: PresenceEvents[K]): void {
    for (const listener of this.listeners[event]) {
      try {
        listener(value);
      } catch {
        // A listener's bug must not stop presence.
      }
    }
  }
}
