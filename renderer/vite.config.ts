// Builds the UI into renderer/dist, which the peer runtime serves at `/` (and Electron loads from there).
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

/** In `npm run dev:ui`, API calls go to a running peer: `agentjet node` (port 8470) or AGENTJET_PEER_URL. */
const peerUrl = process.env.AGENTJET_PEER_URL ?? 'http://127.0.0.1:8470';

export default defineConfig({
  root: import.meta.dirname,
  // Relative asset URLs: the same build works from the peer's HTTP server and from a file:// or custom origin.
  base: './',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
  },
  server: {
    host: '127.0.0.1',
    proxy: { '/api': { target: peerUrl, ws: true }, '/v1': { target: peerUrl } },
  },
});
