/**
 * Which run starts next, and what a finished run means for the next ones.
 *
 * - Fair share: a global concurrency limit and a per-script one; among scripts with a free slot and work, the one
 *   with the fewest episodes started per unit of weight goes next (cocktail weights).
 * - Retry with backoff: a run the script failed is queued again after a delay that doubles per attempt, while
 *   attempts remain. Tasks keep their order in the queue.
 * - Circuit breaker: `maxConsecutiveFailures` failed runs in a row pause the script, saying why.
 * - Back-pressure: a start the server refuses (503 while the model updates, 429 pool full, or unreachable) is no
 *   run: no run row, not counted as started or as a failure. The task goes back to its place at the head of the
 *   queue and the script starts nothing until the server's Retry-After has passed.
 */
import type { Logger } from '../log.ts';
import type { AttachedClient, InFlight, QueuedEpisode } from './attached-client.ts';
import type { RunVerdict } from './episode-run.ts';
import type { EpisodeSpec } from './tasks.ts';

/** Enough for a lab machine's cores to stay busy with agents that mostly wait on the model. */
export const DEFAULT_MAX_CONCURRENCY = 64;
export const DEFAULT_RETRY_BASE_MS = 500;
/** Retry delays stop growing here: a task is not worth waiting on longer than this between tries. */
const MAX_RETRY_DELAY_MS = 30_000;
/** A refused start without Retry-After (or an unreachable server) waits this long: about one small model update. */
export const DEFAULT_REFUSED_WAIT_MS = 3_000;
/** However long a server asks for, the runner looks again after this: a wrong header must not park a script. */
const MAX_REFUSED_WAIT_MS = 60_000;
/** "Retry-After: 0" must not turn into a busy loop of refused starts. */
const MIN_REFUSED_WAIT_MS = 250;

export interface SchedulerOptions {
  maxConcurrency: number;
  retryBaseMs: number;
  /** The wait after a refused start that came without Retry-After. */
  refusedWaitMs: number;
  log?: Logger;
  /** Runs one task of a client; `onStarted` once its episodes have begun (a refused start never calls it). */
  run(client: AttachedClient, spec: EpisodeSpec, signal: AbortSignal, onStarted: () => void): Promise<RunVerdict>;
  /** A client's state or counts changed. */
  changed(client: AttachedClient): void;
  /** Pause a client (breaker: the circuit breaker did, or its task source failed). */
  pause(client: AttachedClient, reason: string, breaker: boolean): void;
}

export class Scheduler {
  /** The attached clients, by name. */
  readonly clients = new Map<string, AttachedClient>();
  private inFlightTotal = 0;
  private pumping = false;
  private pumpAgain = false;
  private wakeTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: SchedulerOptions) {}

  /** A new client starts at the level of the running ones, so it neither starves them nor waits for them. */
  add(client: AttachedClient): void {
    const levels = [...this.clients.values()].filter((c) => c.state === 'running').map((c) => c.level);
    client.served = levels.length > 0 ? Math.min(...levels) * client.options.weight : 0;
    this.clients.set(client.name, client);
  }

  isAttached(client: AttachedClient): boolean {
    return this.clients.get(client.name) === client;
  }

  inFlight(): InFlight[] {
    return [...this.clients.values()].flatMap((c) => [...c.inFlight]);
  }

  /** Stops starting runs (in-flight ones are the caller's to abort). */
  close(): void {
    this.closed = true;
    clearTimeout(this.wakeTimer);
  }

  /** Starts runs while there are free slots and clients with work; serialised, re-run when asked mid-way. */
  pump(): void {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    void this.fill().finally(() => {
      this.pumping = false;
      if (this.pumpAgain) {
        this.pumpAgain = false;
        this.pump();
      }
    });
  }

  private ready(client: AttachedClient, now: number): boolean {
    return (
      client.state === 'running' &&
      client.heldUntil <= now &&
      client.inFlight.size < (client.probing ? 1 : client.options.concurrency) &&
      (!client.exhausted || client.queue.some((q) => q.notBefore <= now))
    );
  }

  private async fill(): Promise<void> {
    while (!this.closed && this.inFlightTotal < this.options.maxConcurrency) {
      const now = Date.now();
      const ready = [...this.clients.values()].filter((c) => this.ready(c, now));
      if (ready.length === 0) break;
      // Weighted fair share: the client furthest behind its share goes next.
      const client = ready.reduce((a, b) => (b.level < a.level ? b : a));
      const item = await this.nextEpisode(client, now);
      if (item && (client.state !== 'running' || !this.isAttached(client))) {
        // Paused or detached while the task source was producing: keep the task for a resume, start nothing.
        if (this.isAttached(client)) this.putBack(client, { ...item, notBefore: 0 });
        continue;
      }
      if (!item) {
        this.finishIfDone(client);
        continue;
      }
      client.served += 1;
      this.start(client, item);
    }
    this.armWake();
  }

  private async nextEpisode(client: AttachedClient, now: number): Promise<QueuedEpisode | undefined> {
    const due = client.queue.findIndex((q) => q.notBefore <= now);
    if (due >= 0) return client.queue.splice(due, 1)[0];
    if (client.exhausted) return undefined;
    const specs = client.specs;
    let next: IteratorResult<EpisodeSpec>;
    try {
      next = await specs.next();
    } catch (err) {
      if (client.specs === specs) {
        client.exhausted = true;
        this.options.pause(client, `task source failed: ${(err as Error).name}: ${(err as Error).message}`, true);
      }
      return undefined;
    }
    // A hot swap may have replaced the task source while we waited; this spec belongs to the old one.
    if (client.specs !== specs) return undefined;
    if (next.done) {
      client.exhausted = true;
      return undefined;
    }
    return { spec: next.value, attempt: 0, notBefore: 0, order: client.nextOrder++ };
  }

  /** Queues a task again in its place: tasks keep the order the task source gave them. */
  private putBack(client: AttachedClient, item: QueuedEpisode): void {
    const at = client.queue.findIndex((q) => q.order > item.order);
    if (at < 0) client.queue.push(item);
    else client.queue.splice(at, 0, item);
  }

  /** Queued tasks and held clients wake the scheduler when due. */
  private armWake(): void {
    clearTimeout(this.wakeTimer);
    if (this.closed) return;
    const now = Date.now();
    const times = [...this.clients.values()]
      .filter((c) => c.state === 'running')
      .flatMap((c) => [...c.queue.map((q) => Math.max(q.notBefore, c.heldUntil)), ...(c.heldUntil > now ? [c.heldUntil] : [])]);
    if (times.length === 0) return;
    this.wakeTimer = setTimeout(() => this.pump(), Math.max(0, Math.ceil(Math.min(...times) - now)));
    this.wakeTimer.unref();
  }

  private finishIfDone(client: AttachedClient): void {
    if (client.state === 'running' && !client.hasWork && client.inFlight.size === 0) {
      client.state = 'finished';
      this.options.changed(client);
    }
  }

  private start(client: AttachedClient, item: QueuedEpisode): void {
    const controller = new AbortController();
    const run: InFlight = { version: client.version, controller, done: Promise.resolve() };
    client.inFlight.add(run);
    this.inFlightTotal++;
    const started = () => {
      client.counts.started++;
      // Accepted: the server takes episodes again, every slot may start.
      if (client.probing) {
        client.probing = false;
        this.pump();
      }
      this.options.changed(client);
    };
    run.done = this.options
      .run(client, item.spec, controller.signal, started)
      .then((verdict) => this.settle(client, run, item, verdict))
      .catch((err) => this.options.log?.error('runner bug', { error: String((err as Error)?.stack ?? err) }))
      .finally(() => {
        client.inFlight.delete(run);
        this.inFlightTotal--;
        if (client.state === 'running' && !client.hasWork && client.inFlight.size === 0) client.state = 'finished';
        this.options.changed(client);
        this.pump();
      });
  }

  /** What a finished run means for the client's counts, queue and breaker. */
  private settle(client: AttachedClient, run: InFlight, item: QueuedEpisode, verdict: RunVerdict): void {
    const current = run.version === client.version && this.isAttached(client);
    switch (verdict.kind) {
      case 'ended':
        client.countEnded(item.spec.taskId, verdict.reward);
        return;
      case 'refused': {
        // No run happened: undo its share, and wait as long as the server asked before starting anything.
        client.served -= 1;
        const wait = Math.min(MAX_REFUSED_WAIT_MS, Math.max(MIN_REFUSED_WAIT_MS, verdict.retryAfterMs ?? this.options.refusedWaitMs));
        client.heldUntil = Math.max(client.heldUntil, Date.now() + wait);
        client.probing = true;
        // A task of a version swapped out meanwhile is dropped with it (the new version has its own tasks).
        if (current) this.putBack(client, { ...item, notBefore: 0 });
        this.options.log?.debug('episode start refused; waiting', { client: client.name, waitMs: wait, reason: verdict.reason });
        return;
      }
      case 'aborted':
        client.countAborted(item.spec.taskId);
        return;
      case 'failed':
        client.countAborted(item.spec.taskId);
        client.counts.consecutiveFailures++;
        if (current && item.attempt < client.options.retries) {
          const attempt = item.attempt + 1;
          client.counts.retried++;
          const delay = Math.min(MAX_RETRY_DELAY_MS, this.options.retryBaseMs * 2 ** (attempt - 1));
          this.putBack(client, { ...item, attempt, notBefore: Date.now() + delay });
        }
        if (client.state === 'running' && client.counts.consecutiveFailures >= client.options.maxConsecutiveFailures) {
          this.options.pause(client, `circuit breaker: ${client.counts.consecutiveFailures} episodes failed in a row; last: ${verdict.abort.reason}`, true);
        }
        return;
    }
  }
}
