import { describe, expect, it } from 'vitest';
import { AdmissionThrottledError, HostedModel, MAX_HELD_ADMISSIONS, ModelNotReadyError, PoolFullError, type EpisodeDone } from './model-host.ts';
import { resolveModelSpecs } from './model-spec.ts';
import { ModelSpecError } from './model-host.ts';

function model(limit = 2) {
  const m = new HostedModel({ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: ['small'], poolLimit: limit });
  m.setState('idle');
  return m;
}

const done = (episodeId: string, outcome: EpisodeDone['outcome'] = 'ended'): EpisodeDone => ({
  episodeId,
  model: 'tiny',
  groupId: 'g',
  kind: 'train',
  outcome,
  reward: outcome === 'ended' ? 1 : null,
  policyVersion: 0,
});

describe('HostedModel', () => {
  it('rolls while episodes run, refuses past its pool limit, idles when empty', () => {
    const m = model(2);
    m.admitEpisode('a');
    expect(m.state).toBe('rolling');
    m.admitEpisode('b');
    expect(() => m.admitEpisode('c')).toThrow(PoolFullError);
    m.releaseEpisode(done('a'));
    m.releaseEpisode(done('b', 'aborted'));
    expect(m.state).toBe('idle');
    expect(m.pool.active).toBe(0);
  });

  it('drains: no new episode, resolves when the last in flight finishes, tells listeners each outcome', async () => {
    const m = model(4);
    const seen: string[] = [];
    m.onEpisodeDone((d) => seen.push(`${d.episodeId}:${d.outcome}`));
    m.admitEpisode('a');
    m.admitEpisode('b');
    let drained = false;
    const draining = m.drain().then(() => (drained = true));
    expect(m.state).toBe('draining');
    expect(() => m.admitEpisode('c')).toThrow(ModelNotReadyError);
    m.releaseEpisode(done('a'));
    await Promise.resolve();
    expect(drained).toBe(false);
    m.releaseEpisode(done('b', 'aborted'));
    m.releaseEpisode(done('b', 'aborted')); // twice: counted once
    await draining;
    expect(seen).toEqual(['a:ended', 'b:aborted']);
    m.setState('updating');
    m.setPolicy(1, 1);
    m.resume();
    expect(m.status()).toMatchObject({ engineState: 'idle', policyVersion: 1, step: 1, pool: { active: 0, limit: 4 } });
  });

  it('answers to its name and aliases only', () => {
    const m = model();
    expect(m.answersTo('tiny') && m.answersTo('small')).toBe(true);
    expect(m.answersTo('gpt-4')).toBe(false);
  });
});

describe('resolveModelSpecs', () => {
  it('names builtin models after themselves and adds aliases', () => {
    const [spec] = resolveModelSpecs([{ source: 'builtin:tiny' }], ['gpt-4o-mini=tiny']);
    expect(spec).toMatchObject({ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: ['gpt-4o-mini'] });
  });

  it('refuses duplicate names, aliases of unknown models and missing folders', () => {
    expect(() => resolveModelSpecs([{ source: 'builtin:tiny' }, { source: 'builtin:tiny' }])).toThrow(ModelSpecError);
    expect(() => resolveModelSpecs([{ source: 'builtin:tiny' }], ['x=nothing'])).toThrow(ModelSpecError);
    expect(() => resolveModelSpecs([{ source: '/no/such/model/folder' }])).toThrow(ModelSpecError);
  });
});

describe('a bounded drain', () => {
  it('hands the episodes still in flight after drainTimeoutS to its listeners, then resolves once they are out', async () => {
    const m = new HostedModel({ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 4, drainTimeoutS: 0.05 });
    m.setState('idle');
    m.admitEpisode('quick');
    m.admitEpisode('idle-1');
    m.admitEpisode('idle-2');
    const overdue: string[][] = [];
    m.onDrainOverdue((ids) => {
      overdue.push(ids);
      for (const id of ids) m.releaseEpisode(done(id, 'aborted'));
    });
    const draining = m.drain();
    m.releaseEpisode(done('quick'));
    await draining;
    expect(overdue).toEqual([['idle-1', 'idle-2']]);
    expect(m.pool.active).toBe(0);
  });

  it('tells no one when every episode finished in time', async () => {
    const m = new HostedModel({ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit: 4, drainTimeoutS: 0.05 });
    m.setState('idle');
    m.admitEpisode('a');
    let told = false;
    m.onDrainOverdue(() => (told = true));
    const draining = m.drain();
    m.releaseEpisode(done('a'));
    await draining;
    // A later drain with nothing in flight resolves at once and schedules nothing.
    await m.drain();
    expect(told).toBe(false);
  });
});

describe('train begins held for the staleness bound', () => {
  /** A model whose gate is closed until `open()`. */
  function gated(poolLimit: number, admissionHoldMs?: number) {
    const m = new HostedModel({ name: 'tiny', source: { kind: 'builtin', name: 'tiny' }, aliases: [], poolLimit, admissionHoldMs });
    m.setState('idle');
    let closed = true;
    m.setAdmissionGate(() => (closed ? 'the bound is reached' : null));
    return {
      m,
      open() {
        closed = false;
        m.reopenAdmissions();
      },
    };
  }

  it('go in first come first served when the gate opens; one beyond MAX_HELD_ADMISSIONS is refused at once', async () => {
    const { m, open } = gated(MAX_HELD_ADMISSIONS + 1);
    const admitted: number[] = [];
    const held = Array.from({ length: MAX_HELD_ADMISSIONS }, (_, i) => m.admitEpisodeWhenOpen(`e${i}`, 'train').then(() => admitted.push(i)));
    expect(m.heldAdmissionCount).toBe(MAX_HELD_ADMISSIONS);
    await expect(m.admitEpisodeWhenOpen('one-too-many', 'train')).rejects.toBeInstanceOf(AdmissionThrottledError);
    // Eval episodes never wait for the bound.
    await m.admitEpisodeWhenOpen('eval', 'eval');
    open();
    await Promise.all(held);
    expect(admitted).toEqual(Array.from({ length: MAX_HELD_ADMISSIONS }, (_, i) => i));
    expect(m.activeTrainEpisodes).toBe(MAX_HELD_ADMISSIONS);
  });

  it('are answered as new begins are when the model starts draining, and the pool fills', async () => {
    const draining = gated(4);
    const waiting = draining.m.admitEpisodeWhenOpen('a', 'train');
    void draining.m.drain();
    await expect(waiting).rejects.toBeInstanceOf(ModelNotReadyError);

    const full = gated(1);
    const first = full.m.admitEpisodeWhenOpen('a', 'train');
    full.m.admitEpisode('eval', 'eval');
    full.open();
    await expect(first).rejects.toBeInstanceOf(PoolFullError);
  });

  it('are refused with AdmissionThrottledError once the hold is spent, and leave nothing behind', async () => {
    const { m } = gated(4, 1);
    await expect(m.admitEpisodeWhenOpen('a', 'train')).rejects.toBeInstanceOf(AdmissionThrottledError);
    expect(m.heldAdmissionCount).toBe(0);
    expect(m.pool.active).toBe(0);
  });

  it('a begin whose client went away is never admitted', async () => {
    const { m, open } = gated(4);
    const gone = new AbortController();
    const waiting = m.admitEpisodeWhenOpen('a', 'train', gone.signal);
    gone.abort(new Error('hung up'));
    await expect(waiting).rejects.toThrow('hung up');
    open();
    expect(m.pool.active).toBe(0);
  });
});
