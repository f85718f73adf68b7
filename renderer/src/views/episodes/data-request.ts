/**
 * The control-API request function for the data views, made once per page from the same origin and token the
 * shell connected with (api/client.ts, api/token.ts).
 */
import { apiUrlForPage } from '../../api/client.ts';
import { TOKEN_STORAGE_KEY } from '../../api/token.ts';
import { createDataRequest, type DataRequest } from '../../store/episodes/request.ts';

let shared: DataRequest | null = null;

export function dataRequest(): DataRequest {
  shared ??= createDataRequest({
    apiUrl: apiUrlForPage(window.location),
    token: window.sessionStorage.getItem(TOKEN_STORAGE_KEY) ?? '',
  });
  return shared;
}
