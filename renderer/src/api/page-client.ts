/**
 * The page's one control-API client, made on first use from the page's origin and the token the entry point kept
 * (token.ts): the connection, the views and their loaders all share it.
 */
import { apiUrlForPage, createControlApiClient, type ApiRequest, type ControlApiClient } from './client.ts';
import { TOKEN_STORAGE_KEY } from './token.ts';

let shared: ControlApiClient | null = null;

export function pageClient(): ControlApiClient {
  shared ??= createControlApiClient({
    apiUrl: apiUrlForPage(window.location),
    token: window.sessionStorage.getItem(TOKEN_STORAGE_KEY) ?? '',
  });
  return shared;
}

/** The page client's request function, as the slices' loaders take it. */
export function apiRequest(): ApiRequest {
  return pageClient().request;
}
