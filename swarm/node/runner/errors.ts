/** Named errors of the client runner; callers and tests match on `name` (and `code` where there is one). */

/** A task file or generator that cannot be read; says which line or export is wrong. */
export class TaskSourceError extends Error {
  override name = 'TaskSourceError';
  constructor(
    message: string,
    readonly line?: number,
  ) {
    super(message);
  }
}

/** A script that cannot be attached (missing file, unknown runtime). */
export class ScriptAttachError extends Error {
  override name = 'ScriptAttachError';
}

/** A script that does not compile (a Python syntax error); `location` is `file:line` of the first error. */
export class ScriptSyntaxError extends ScriptAttachError {
  override name = 'ScriptSyntaxError';
  constructor(
    message: string,
    readonly location: string,
  ) {
    super(message);
  }
}

/**
 * Attaching under a name whose attached script came from another folder (or another uploaded file name) without
 * `swap: true`: probably a second example that would silently replace the first.
 */
export class ScriptSwapRefusedError extends Error {
  override name = 'ScriptSwapRefusedError';
}

/** A script names a model (or a team role's model) that no peer hosts, by its name or a host alias. */
export class ModelNotHostedError extends Error {
  override name = 'ModelNotHostedError';
}

/** A reward module that cannot be loaded or that returned something other than a reward. */
export class RewardModuleError extends Error {
  override name = 'RewardModuleError';
}

export class ClientNotFoundError extends Error {
  override name = 'ClientNotFoundError';
}

/** The runner was closed (the peer is stopping): it starts nothing any more. */
export class RunnerStoppedError extends Error {
  override name = 'RunnerStoppedError';
  constructor() {
    super('the client runner is stopped (the peer is shutting down); attach again after it restarts');
  }
}

/** The episode API answered with an error; `status` and `errorName` are the remote's. */
export class EpisodeApiError extends Error {
  override name = 'EpisodeApiError';
  constructor(
    message: string,
    readonly status: number,
    readonly errorName: string,
    /** The server's Retry-After, in milliseconds (null when it sent none). */
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
  }
  /** Busy (429 pool full, 503 draining or updating), other 5xx and network failures are worth retrying; 4xx are not. */
  get retryable(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}
