#!/usr/bin/env node
// Development launcher: runs the TypeScript sources through tsx, so tests and `npm run inferscope`
// see every change without a build. The package's bin is the compiled dist/cli/main.js.
// A command that runs a load loop is started again with its flags first, before tsx loads (plain JS).
import "../src/cli/launch-first.mjs";

// Loading tsx and the sources takes a while: a signal meanwhile is noted and handed to the CLI's
// interrupt path (src/interrupt.ts), which removes this stand-in; never Node's default exit by signal.
const early = (sig) => {
  early.seen ??= sig;
};
globalThis[Symbol.for("inferscope.earlySignalHandler")] = early;
process.on("SIGINT", early);
process.on("SIGTERM", early);

const { register } = await import("tsx/esm/api");
register();
await import("../src/cli/main.ts");
