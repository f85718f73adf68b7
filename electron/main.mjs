// Electron's entry point (`electron electron/main.mjs`): registers tsx so the TypeScript main process runs
// without a build step, exactly like bin/agentjet.mjs does for the CLI.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
