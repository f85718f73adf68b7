/**
 * Saving a control-API resource as a file (checkpoint archives): the client (client.ts) fetches it with the bearer
 * token — a plain link could not send it — and this hands the body to the browser's download with the name the
 * peer gave it.
 */

/** Saves `response`'s body as a download named by its Content-Disposition, else `fallbackName`. */
export async function saveDownload(response: Response, fallbackName: string): Promise<void> {
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
}

/** The file name of a `Content-Disposition: attachment; filename="…"` header. */
export function fileNameOf(disposition: string | null): string | null {
  const match = disposition ? /filename="([^"]+)"/.exec(disposition) : null;
  return match ? match[1] : null;
}
