/**
 * Places inside the Runs view, as the navigation slice's `path` holds them: '' (the list), `<id>` (a run's page),
 * `compare/<id>,<id>,…` (runs overlaid). Run ids never hold a slash, so `compare/` cannot be mistaken for one.
 */
export type RunsRoute = { kind: 'list' } | { kind: 'run'; id: string } | { kind: 'compare'; ids: string[] };

const COMPARE_PREFIX = 'compare/';

export function runsRoute(path: string): RunsRoute {
  if (path === '') return { kind: 'list' };
  if (path.startsWith(COMPARE_PREFIX))
    return { kind: 'compare', ids: path.slice(COMPARE_PREFIX.length).split(',').filter((id) => id !== '').map(decodeURIComponent) };
  return { kind: 'run', id: decodeURIComponent(path) };
}

export function runPath(id: string): string {
  return encodeURIComponent(id);
}

export function comparePath(ids: readonly string[]): string {
  return `${COMPARE_PREFIX}${ids.map(encodeURIComponent).join(',')}`;
}
