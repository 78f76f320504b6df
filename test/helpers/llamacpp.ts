// The real llama.cpp CPU server from ../shared/engines/llama.cpp, and why it cannot run here.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const LLAMA_DIR = resolve("../shared/engines/llama.cpp");
export const LLAMA_SERVER = join(LLAMA_DIR, "llama-server");
export const LLAMA_SMALL = join(LLAMA_DIR, "small.gguf");

/** The tests' llama-server arguments: the small model under `alias`, one thread, 4 slots, /metrics on. */
export function llamaSmallArgs(alias: string, port: number): string[] {
  return ["-m", LLAMA_SMALL, "--alias", alias, "--host", "127.0.0.1", "--port", String(port), "--metrics"].concat([
    "--threads",
    "1",
    "-c",
    "4096",
    "-np",
    "4",
  ]);
}

/** Why the binary cannot run here (no file, no AVX2/FMA/F16C), or undefined; throws under INFERSCOPE_REQUIRE_E2E. */
export function llamaSkipReason(): string | undefined {
  let why: string | undefined;
  if (!existsSync(LLAMA_SERVER) || !existsSync(LLAMA_SMALL)) why = `${LLAMA_SERVER} or ${LLAMA_SMALL} is missing`;
  else {
    const flags =
      readFileSync("/proc/cpuinfo", "utf8")
        .match(/^flags\s*:(.*)$/m)?.[1]
        ?.split(/\s+/) ?? [];
    const lack = ["avx2", "fma", "f16c"].filter((f) => !flags.includes(f));
    if (lack.length) why = `this CPU lacks ${lack.join(", ")}: the portable llama-server needs AVX2, FMA and F16C`;
  }
  if (why && process.env.INFERSCOPE_REQUIRE_E2E) throw new Error(`${why}, but INFERSCOPE_REQUIRE_E2E is set`);
  return why;
}
