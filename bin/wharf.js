#!/usr/bin/env node
// Node 20 cannot run .ts by itself: register tsx in this process (so signals
// reach the CLI directly) and load the TypeScript entry point.
import { register } from 'tsx/esm/api';

register();
await import('../cli/wharf.ts');
