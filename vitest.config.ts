import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['{worker,swarm,p2p,sdk,examples,bench,build,electron}/**/*.test.ts', 'renderer/src/**/*.test.{ts,tsx}'],
    exclude: ['node_modules/**', 'e2e/**'],
    setupFiles: ['p2p/polyfill.ts'],
    // Forks, not threads: better-sqlite3 and the tfjs wasm backend each want a process of their own.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
