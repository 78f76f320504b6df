// Imported first by the CLI entry: SIGINT and SIGTERM are ours before any other module runs, so an
// interrupt in the first millisecond exits 130 (not Node's default 143 or death by signal).
import { installInterrupts } from "../interrupt.ts";

installInterrupts();
