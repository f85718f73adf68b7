/** Serves the built renderer (renderer/dist): files by path, index.html for anything else (client-side routes). */
import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { HttpError } from './errors.ts';

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};

const notBuiltPage = `<!doctype html><meta charset="utf-8"><title>AgentJet</title>
<body style="font-family:system-ui;max-width:40em;margin:4em auto">
<h1>AgentJet peer is running</h1>
<p>The UI has not been built in this checkout. Run <code>npm run build:ui</code> and reload.</p>
<p>The control API is at <code>/api/status</code> and the OpenAI-compatible gateway at <code>/v1</code>.</p></body>`;

/** Throws an HttpError (400) for a path that is not valid percent-encoding; the server renders it. */
export function createStaticHandler(root: string) {
  return function serveStatic(req: IncomingMessage, res: ServerResponse, pathname: string): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    const index = join(root, 'index.html');
    if (!existsSync(index)) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(notBuiltPage);
      return;
    }
    const requested = normalize(join(root, decodePath(pathname)));
    const inside = requested === root || requested.startsWith(root.endsWith(sep) ? root : root + sep);
    let file = index;
    if (inside && existsSync(requested) && statSync(requested).isFile()) file = requested;
    const isAsset = file !== index && file.includes(`${sep}assets${sep}`);
    res.writeHead(200, {
      'content-type': contentTypes[extname(file)] ?? 'application/octet-stream',
      // Vite fingerprints assets, so they can be cached; index.html must always be fresh.
      'cache-control': isAsset ? 'public, max-age=31536000, immutable' : 'no-cache',
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    // The file can vanish between the check and the read (a UI rebuild); an unhandled stream error would end the peer.
    const stream = createReadStream(file);
    stream.on('error', () => res.destroy());
    stream.pipe(res);
  };
}

function decodePath(pathname: string): string {
  try {
    return decodeURIComponent(pathname);
  } catch {
    throw new HttpError(400, 'InvalidRequestError', 'the path is not valid percent-encoding (UTF-8 bytes as %XX)', {
      code: 'invalid_path_encoding',
    });
  }
}
