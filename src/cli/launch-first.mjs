// Imported first by the CLI entry (and by the development launcher, before tsx): a command that runs a load
// loop is started again with the flags it needs (launch.mjs) before any other module loads.
import { execWithLoadLoopFlags, runsLoadLoop } from "./launch.mjs";

if (runsLoadLoop(process.argv.slice(2))) execWithLoadLoopFlags();
