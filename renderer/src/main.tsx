/**
 * The renderer's entry point: read the token, connect the store to the peer, keep the view in the URL
 * fragment, render the shell.
 */
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.tsx';
import { startConnection } from './api/connection.ts';
import { pageClient } from './api/page-client.ts';
import { resolveToken } from './api/token.ts';
import { appStore } from './store/index.ts';
import { hashOf, routeFromHash } from './store/navigation/slice.ts';
import { desktopBridge } from './desktop.ts';
import { readDroppedScript, scriptAtPath } from './views/clients/read-dropped.ts';
import './styles.css';

const token = resolveToken({ location: window.location, storage: window.sessionStorage, history: window.history });

const initialRoute = routeFromHash(window.location.hash);
if (initialRoute) appStore.getState().showView(initialRoute.view, initialRoute.path);
window.history.replaceState(null, '', `${window.location.pathname}${window.location.search}${hashOf(appStore.getState().navigation)}`);

// Mirror the view into the fragment (outside React: it is a side effect of the store, not of rendering). Moving
// inside a view (a run's page from the runs list) adds a history entry, so Back returns; switching views does not.
appStore.subscribe((state, previous) => {
  const next = state.navigation;
  if (next === previous.navigation || window.location.hash === hashOf(next)) return;
  if (next.view === previous.navigation.view) window.history.pushState(null, '', hashOf(next));
  else window.history.replaceState(null, '', hashOf(next));
});
window.addEventListener('hashchange', () => {
  const route = routeFromHash(window.location.hash);
  if (route) appStore.getState().showView(route.view, route.path);
});

// A script dropped anywhere on the window is attached like one dropped on the Clients view's drop zone (which
// handles the drops that land on it first). Anything else dropped is refused there, with the reason.
window.addEventListener('dragover', (event) => {
  if (event.dataTransfer?.types.includes('Files')) event.preventDefault();
});
window.addEventListener('drop', (event) => {
  const file = event.dataTransfer?.files[0];
  if (event.defaultPrevented || !file) return;
  event.preventDefault();
  appStore.getState().showView('clients');
  readDroppedScript(file).then(
    (script) => appStore.getState().scriptDropped(script),
    (error: unknown) => appStore.getState().attachFailed(error instanceof Error ? error.message : String(error)),
  );
});

// In the desktop shell, File › Attach Script… (or the tray) hands over a path: the Clients view's form takes it.
desktopBridge()?.onScriptChosen((path) => {
  appStore.getState().showView('clients');
  appStore.getState().scriptDropped(scriptAtPath(path));
});

const connection = token
  ? startConnection({
      // The token is in sessionStorage now (resolveToken), where the page client reads it.
      client: pageClient(),
      actions: appStore.getState(),
      failedAttempts: () => appStore.getState().connection.failedAttempts,
    })
  : null;

const root = document.getElementById('root');
if (!root) throw new Error('index.html has no #root element');
createRoot(root).render(
  <StrictMode>
    <App hasToken={token !== null} onRetryNow={() => connection?.retryNow()} />
  </StrictMode>,
);
