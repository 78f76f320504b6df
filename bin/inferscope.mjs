#!/usr/bin/env node
// Development launcher: runs the TypeScript sources through tsx, so tests and `npm run inferscope`
// see every change without a build. The package's bin is the compiled dist/cli/main.js.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
