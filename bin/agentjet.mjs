#!/usr/bin/env node
// The `agentjet` command. Sources are TypeScript run through tsx, so there is no build step.
import { register } from 'tsx/esm/api';

register();
await import('../p2p/polyfill.ts');
const { main } = await import('../swarm/node/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
