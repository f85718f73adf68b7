/**
 * The control-API request function for the data views, made once per page from the same origin and token the
 * shell connected with (api/client.ts, api/token.ts).
 */
import { apiUrlForPage } from '../../api/client.ts';
import { createDownload, type Download } from '../../api/download.ts';
import { TOKEN_STORAGE_KEY } from '../../api/token.ts';
import { createDataRequest, type DataRequest } from '../../store/episodes/request.ts';

let shared: DataRequest | null = null;
let sharedDownload: Download | null = null;

function pageConnection() {
  return { apiUrl: apiUrlForPage(window.location), token: window.sessionStorage.getItem(TOKEN_STORAGE_KEY) ?? '' };
}

export function dataRequest(): DataRequest {
  shared ??= createDataRequest(pageConnection());
  return shared;
}

/** Saves a control-API resource as a file (see api/download.ts). */
export function dataDownload(): Download {
  sharedDownload ??= createDownload(pageConnection());
  return sharedDownload;
}
