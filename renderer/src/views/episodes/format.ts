/** Display helpers of the episode views. Pure, tested. */

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * `Nov 30 14:03:07` in local time; today's episodes show the time only. Called for every visible row on every
 * scroll frame, so it avoids Intl (building a formatter costs about a millisecond).
 */
export function formatEpisodeTime(iso: string, now: Date = new Date()): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n: number) => String(n).padStart(2, '0');
  const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  const sameDay =
    date.getFullYear() === now.getFullYear() &&
    date.getMonth() === now.getMonth() &&
    date.getDate() === now.getDate();
  return sameDay ? time : `${MONTHS[date.getMonth()]} ${date.getDate()} ${time}`;
}

/** A reward with three significant decimals at most; `—` when none was reported. */
export function formatReward(reward: number | null): string {
  if (reward === null) return '—';
  if (Number.isInteger(reward)) return String(reward);
  return reward.toFixed(Math.abs(reward) >= 10 ? 1 : 3);
}

/** A content hash shortened to its first characters (enough to tell versions apart). */
export function shortHash(hash: string | null, length = 8): string {
  if (!hash) return '—';
  return hash.replace(/^sha256:/, '').slice(0, length);
}
