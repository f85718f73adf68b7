/** Places inside the Research view, as the navigation slice's `path` holds them: '' (the list), `<id>` (a study). */
export type ResearchRoute = { kind: 'list' } | { kind: 'study'; id: string };

export function researchRoute(path: string): ResearchRoute {
  return path === '' ? { kind: 'list' } : { kind: 'study', id: decodeURIComponent(path) };
}

export function studyPath(id: string): string {
  return encodeURIComponent(id);
}
