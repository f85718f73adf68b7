/**
 * Groups left out of training because every episode in them got the same reward (zero advantage everywhere): how
 * many since the last step (the step's `discardedGroups`), and whether most of the recent ones were, which is the
 * `mostly_discarded` warning a run shows with its reason.
 */
import type { RunWarning } from '../../common/runs-api.ts';

/** The warning looks at the groups of this many recent steps (and those since the last one)… */
const WINDOW_STEPS = 5;
/** …once there are enough of them for a share to mean something, and warns when at least this share was left out. */
const MIN_GROUPS_FOR_WARNING = 8;
const WARNING_SHARE = 0.5;

export class DiscardedGroups {
  private readonly sinceStep = new Set<string>();
  /** Per recent step: [groups discarded before it, groups it trained on]. */
  private readonly recent: Array<[number, number]> = [];

  /** A group was left out; true when it is one not counted yet. */
  add(groupId: string): boolean {
    const fresh = !this.sinceStep.has(groupId);
    this.sinceStep.add(groupId);
    return fresh;
  }

  /** Left out since the last step. */
  get count(): number {
    return this.sinceStep.size;
  }

  /** A step trained on `used` groups: the ones left out before it go into the window. */
  stepDone(used: number): void {
    this.recent.push([this.sinceStep.size, used]);
    if (this.recent.length > WINDOW_STEPS) this.recent.shift();
    this.sinceStep.clear();
  }

  /** The warning, when most of the recent groups were left out. */
  warning(): RunWarning | null {
    let discarded = this.sinceStep.size;
    let used = 0;
    for (const [d, u] of this.recent) {
      discarded += d;
      used += u;
    }
    const total = discarded + used;
    if (total < MIN_GROUPS_FOR_WARNING || discarded / total < WARNING_SHARE) return null;
    return {
      code: 'mostly_discarded',
      message:
        `${discarded} of the last ${total} groups (${Math.round((100 * discarded) / total)}%) were left out: every episode of each got the same reward, ` +
        'so the group has no advantage to learn from. The tasks are too easy or too hard for the model as it is, or the reward is constant: ' +
        'mix in tasks of other difficulty, raise groupSize, sample at a higher temperature, or check the grader.',
    };
  }
}
