/**
 * Saving a control-API resource as a file (checkpoint archives): fetched with the bearer token — a plain link
 * could not send it — and handed to the browser's download with the name the peer gave it.
 */
import { PeerUnreachableError, errorFromResponse } from './errors.ts';

export type Download = (path: string, fallbackName: string) => Promise<void>;

export function createDownload({ apiUrl, token }: { apiUrl: string; token: string }): Download {
  const root = apiUrl.replace(/\/+$/, '');
  return async (path, fallbackName) => {
    let response: Response;
    try {
      response = await fetch(`${root}${path}`, { headers: { Authorization: `Bearer ${token}` } });
    } catch (cause) {
      throw new PeerUnreachableError(`The peer at ${root} did not answer`, { cause });
    }
    if (!response.ok) throw await errorFromResponse(response);
    const url = URL.createObjectURL(await response.blob());
    try {
      const link = document.createElement('a');
      link.href = url;
      link.download = fileNameOf(response.headers.get('content-disposition')) ?? fallbackName;
      document.body.append(link);
      link.click();
      link.remove();
    } finally {
      // The click has started the download; the object URL is no longer needed once the event loop turns.
      setTimeout(() => URL.revokeObjectURL(url), 0);
    }
  };
}

/** The file name of a `Content-Disposition: attachment; filename="…"` header. */
export function fileNameOf(disposition: string | null): string | null {
  const match = disposition ? /filename="([^"]+)"/.exec(disposition) : null;
  return match ? match[1] : null;
}
