import { useRef, type KeyboardEvent } from 'react';
import { useAppStore } from '../store/index.ts';
import { VIEWS, type ViewId } from '../../../electron/common/views.ts';
import { Icon } from './Icon.tsx';
import logoUrl from '../assets/icon.svg';

/**
 * The view list. Tab reaches it; ArrowUp/ArrowDown/Home/End move between entries and show the view (like a
 * tab list), Enter/Space also show it. The current view carries aria-current.
 */
export function Sidebar({ version }: { version: string | null }) {
  const view = useAppStore((s) => s.navigation.view);
  const showView = useAppStore((s) => s.showView);
  const buttons = useRef(new Map<ViewId, HTMLButtonElement>());

  function moveTo(index: number) {
    const target = VIEWS[(index + VIEWS.length) % VIEWS.length];
    showView(target.id);
    buttons.current.get(target.id)?.focus();
  }

  function onKeyDown(event: KeyboardEvent<HTMLButtonElement>, index: number) {
    const moves: Record<string, number> = { ArrowDown: index + 1, ArrowUp: index - 1, Home: 0, End: VIEWS.length - 1 };
    if (event.key in moves) {
      event.preventDefault();
      moveTo(moves[event.key]);
    }
  }

  return (
    <aside className="sidebar">
      <div className="brand">
        <img className="brand__logo" src={logoUrl} alt="" width={28} height={28} />
        <div>
          <div className="brand__name">AgentJet</div>
          <div className="brand__tagline">Swarm RL for agents</div>
        </div>
      </div>
      <nav aria-label="Views">
        <ul className="nav">
          {VIEWS.map((info, index) => (
            <li key={info.id}>
              <button
                type="button"
                ref={(el) => {
                  if (el) buttons.current.set(info.id, el);
                  else buttons.current.delete(info.id);
                }}
                className="nav__item"
                aria-current={info.id === view ? 'page' : undefined}
                data-view={info.id}
                onClick={() => showView(info.id)}
                onKeyDown={(event) => onKeyDown(event, index)}
              >
                <Icon name={info.id} />
                <span>{info.label}</span>
              </button>
            </li>
          ))}
        </ul>
      </nav>
      <div className="sidebar__footer">
        <span>AgentJet Desktop</span>
        <span className="mono">{version ? `v${version}` : '—'}</span>
      </div>
    </aside>
  );
}
