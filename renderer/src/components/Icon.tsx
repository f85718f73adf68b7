/** Line icons drawn inline (no icon font, no network): 20×20, stroke follows the text colour. */
const PATHS = {
  swarm: 'M10 3.5a2 2 0 1 1 0 4 2 2 0 0 1 0-4Zm-5.5 9a2 2 0 1 1 0 4 2 2 0 0 1 0-4Zm11 0a2 2 0 1 1 0 4 2 2 0 0 1 0-4ZM9 7.2 5.6 12.6M11 7.2l3.4 5.4M6.5 14.5h7',
  models: 'M10 2.8 16.5 6.4v7.2L10 17.2 3.5 13.6V6.4L10 2.8Zm0 0v7.2m0 0 6.5-3.6M10 10 3.5 6.4M10 10v7.2',
  runs: 'M3.5 16.5h13M3.5 3.5v13M6 13l3-4 3 2.5 4.5-6',
  research: 'M8 3.5h4M9 3.5v5L4.5 15a1 1 0 0 0 .9 1.5h9.2a1 1 0 0 0 .9-1.5L11 8.5v-5M6.5 12h7',
  clients: 'M3.5 4.5h13v9h-13zM7 16.5h6M10 13.5v3M6.5 8l2 1.5-2 1.5M10.5 11h3',
  episodes: 'M4 5h12M4 10h12M4 15h8M15.5 13.5l2 1.5-2 1.5',
  timeline: 'M3 6h6M11 6h6M3 10h10M15 10h2M3 14h4M9 14h8',
  copy: 'M7 7h9v9H7zM4 13V4h9',
  check: 'M4.5 10.5 8 14l7.5-8',
  terminal: 'M3.5 4.5h13v11h-13zM6.5 8.5l2.5 2-2.5 2M10.5 12.5h3',
  lock: 'M5.5 9h9v7.5h-9zM7.5 9V6.5a2.5 2.5 0 0 1 5 0V9',
} as const;

export type IconName = keyof typeof PATHS;

export function Icon({ name, size = 18 }: { name: IconName; size?: number }) {
  return (
    <svg className="icon" width={size} height={size} viewBox="0 0 20 20" aria-hidden="true" focusable="false">
      <path d={PATHS[name]} fill="none" stroke="currentColor" strokeWidth="1.5" strokeLinecap="round" strokeLinejoin="round" />
    </svg>
  );
}
