// Lint rules, including the layering rule: who may import whom (docs/ARCHITECTURE.md, "Layers").
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import reactHooks from 'eslint-plugin-react-hooks';
import globals from 'globals';

const nodeBuiltins = ['node:*', 'fs', 'path', 'os', 'child_process', 'worker_threads', 'crypto', 'http', 'net'];

/**
 * A `no-restricted-imports` rule from forbidden imports and the reason shown to the developer: each entry is
 * `[patterns, message]` (gitignore-style globs) or `[{ regex }, message]` where a glob cannot say it.
 */
function forbid(groups) {
  return ['error', { patterns: groups.map(([what, message]) => (Array.isArray(what) ? { group: what, message } : { ...what, message })) }];
}

/** What every `common/` folder may not import, whichever layer it belongs to. */
const commonForbidden = [
  [nodeBuiltins, 'common/ is pure: it runs in every process, the browser included.'],
  [['better-sqlite3', 'electron', '**/node/**'], 'common/ must not reach Node-only code.'],
];

/**
 * One layer of the table in docs/ARCHITECTURE.md ("Layers"). A file gets one `no-restricted-imports` (flat config
 * keeps the last one that matches), so a layer's `common/` folders get the layer's groups and the common ones together.
 */
function layer(dir, groups, extra = {}) {
  const files = [`${dir}/**/*.{ts,tsx}`];
  return [
    { files, ignores: ['**/common/**'], ...extra, rules: { ...extra.rules, 'no-restricted-imports': forbid(groups) } },
    { files: [`${dir}/**/common/**/*.{ts,tsx}`], ...extra, rules: { ...extra.rules, 'no-restricted-imports': forbid([...groups, ...commonForbidden]) } },
  ];
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
  ...layer('worker', [
    [['**/swarm/**', '**/p2p/**', '**/renderer/**', '**/electron/**', 'better-sqlite3', 'libp2p', '@libp2p/*'], 'worker/ knows no episodes, networks or storage.'],
  ]),
  ...layer('p2p', [
    [['**/swarm/**', '**/worker/**', '**/renderer/**', '**/electron/**', 'better-sqlite3', '@tensorflow/*'], 'p2p/ knows no models and no SQLite: it carries typed messages and byte streams.'],
  ]),
  ...layer('swarm', [
    [{ regex: '(^|/)(renderer|electron)(/|$)' }, 'swarm/ runs headless: it knows neither the UI (renderer/) nor the desktop shell (electron/).'],
  ]),
  ...layer('electron', [
    [{ regex: '(^|/)renderer/src(/|$)' }, 'The shell and the UI share only pure code: put it in electron/common/ or swarm/common/.'],
  ]),
  ...layer(
    'renderer',
    [
      [nodeBuiltins, 'The renderer runs in a browser: no Node APIs.'],
      [['**/swarm/node/**', '**/worker/**', '**/p2p/**', 'better-sqlite3'], 'The renderer speaks only the control API (types from swarm/common are fine).'],
      // A regex: a glob cannot exclude electron/ and re-include electron/common/ below it.
      [{ regex: '^electron(/|$)|(^|/)electron/(?!common/)' }, 'The renderer shares only electron/common/ with the shell; the rest runs in the main process.'],
    ],
    { languageOptions: { globals: { ...globals.browser } }, plugins: { 'react-hooks': reactHooks }, rules: { ...reactHooks.configs.recommended.rules } },
  ),
  {
    // Test helpers live in testing/ folders; product code never imports them (tests, bench/ and e2e/ may). A rule of
    // its own (typescript-eslint's twin of no-restricted-imports), so it stacks with the layer rules above.
    files: ['**/*.{ts,tsx,js,mjs}'],
    ignores: ['**/*.test.{ts,tsx}', '**/testing/**', 'bench/**', 'e2e/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ regex: '(^|/)testing(/|\\.ts$|$)', message: 'testing/ holds test helpers: product code must not import them.' }] }],
    },
  },
);
