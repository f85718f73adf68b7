// Lint rules, including the layering rule: who may import whom (docs/ARCHITECTURE.md, "Layers").
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import reactHooks from 'eslint-plugin-react-hooks';
import globals from 'globals';

const nodeBuiltins = ['node:*', 'fs', 'path', 'os', 'child_process', 'worker_threads', 'crypto', 'http', 'net'];

/** Build a `no-restricted-imports` rule from forbidden patterns and the reason shown to the developer. */
function forbid(groups) {
  return ['error', { patterns: groups.map(([group, message]) => ({ group, message })) }];
}

export default tseslint.config(
  { ignores: ['node_modules', '**/dist', 'test-results', 'playwright-report', 'runs', '.agentjet', 'examples/**/*.py'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    files: ['worker/**/*.ts'],
    rules: {
      'no-restricted-imports': forbid([
        [['**/swarm/**', '**/p2p/**', '**/renderer/**', '**/electron/**', 'better-sqlite3', 'libp2p', '@libp2p/*'], 'worker/ knows no episodes, networks or storage.'],
      ]),
    },
  },
  {
    files: ['p2p/**/*.ts'],
    rules: {
      'no-restricted-imports': forbid([
        [['**/swarm/**', '**/worker/**', '**/renderer/**', '**/electron/**', 'better-sqlite3', '@tensorflow/*'], 'p2p/ knows no models and no SQLite: it carries typed messages and byte streams.'],
      ]),
    },
  },
  {
    files: ['**/common/**/*.ts'],
    rules: {
      'no-restricted-imports': forbid([
        [nodeBuiltins, 'common/ is pure: it runs in every process, the browser included.'],
        [['better-sqlite3', 'electron', '**/node/**'], 'common/ must not reach Node-only code.'],
      ]),
    },
  },
  {
    files: ['renderer/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
    plugins: { 'react-hooks': reactHooks },
    rules: {
      ...reactHooks.configs.recommended.rules,
      'no-restricted-imports': forbid([
        [nodeBuiltins, 'The renderer runs in a browser: no Node APIs.'],
        [['**/swarm/node/**', '**/worker/**', '**/p2p/**', '**/electron/**', 'better-sqlite3', 'electron'], 'The renderer speaks only the control API (types from swarm/common are fine).'],
      ]),
    },
  },
);
