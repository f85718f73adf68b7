import { useAppStore } from '../store/index.ts';
import { navigationSelectors } from '../store/navigation/selectors.ts';

/** The current view's title and one-line purpose. The title takes focus after navigation, for screen readers. */
export function PageHeader() {
  const info = useAppStore((s) => navigationSelectors.currentView(s.navigation));
  return (
    <div className="page-header">
      <h1 className="page-header__title" tabIndex={-1} id="page-title">
        {info.label}
      </h1>
      <p className="page-header__summary">{info.summary}</p>
    </div>
  );
}
