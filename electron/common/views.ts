/** The app's views, in sidebar order: shared by the UI (sidebar, navigation) and the shell (menu, notifications). */
export const VIEW_IDS = ['swarm', 'models', 'runs', 'research', 'clients', 'episodes', 'timeline'] as const;
export type ViewId = (typeof VIEW_IDS)[number];

export interface ViewInfo {
  id: ViewId;
  label: string;
  /** One line under the title: what the view is for. */
  summary: string;
}

export const VIEWS: readonly ViewInfo[] = [
  { id: 'swarm', label: 'Swarm', summary: 'This peer, the models it hosts and the machines it trains with.' },
  { id: 'models', label: 'Models', summary: 'Hosted models, their training progress and policy versions.' },
  { id: 'runs', label: 'Runs', summary: 'Every training run of this data dir: its configuration, curves and results, side by side.' },
  { id: 'research', label: 'Research', summary: 'Studies: pre-registered questions answered by runs over arms and seeds, live, and their reports.' },
  { id: 'clients', label: 'Clients', summary: 'Agent scripts that run tasks against the gateway and report rewards.' },
  { id: 'episodes', label: 'Episodes', summary: 'Every agent run: its calls, tokens, reward and outcome.' },
  { id: 'timeline', label: 'Timeline', summary: 'How an episode’s calls were merged into training sequences, token by token.' },
];

export function isViewId(value: string): value is ViewId {
  return (VIEW_IDS as readonly string[]).includes(value);
}
