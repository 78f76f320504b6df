// The real llama.cpp CPU server from ../shared/engines/llama.cpp, and why it cannot run here.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";

export const LLAMA_DIR = resolve("../shared/engines/llama.cpp");
export const LLAMA_SERVER = join(LLAMA_DIR, "llama-server");
export const LLAMA_SMALL = join(LLAMA_DIR, "small.gguf");
/** The same architecture, ~5× fewer parameters: decodes ~10× faster than small on one thread. */
export const LLAMA_MICRO = join(LLAMA_DIR, "micro.gguf");

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
  if (!existsSync(LLAMA_SERVER) || !existsSync(LLAMA_SMALL) || !existsSync(LLAMA_MICRO))
    why = `${LLAMA_SERVER}, ${LLAMA_SMALL} or ${LLAMA_MICRO} is missing`;
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

/** A free loopback port (the kernel's pick, released for the server to take). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

export interface LlamaServer {
  url: string;
  port: number;
  child: ChildProcess;
  /** SIGKILL: b4748 aborts (134) on SIGTERM (llama.cpp#12180), and stopping it is all the tests need. */
  stop(): void;
}

/** Starts the small model's llama-server under `alias` on a free loopback port; resolves once /health answers 200. */
export async function startLlamaServer(alias: string, healthyWithinMs = 30_000): Promise<LlamaServer> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(LLAMA_SERVER, llamaSmallArgs(alias, port), { stdio: "ignore" });
  const stop = () => void child.kill("SIGKILL");
  for (const end = performance.now() + healthyWithinMs; ; ) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) return { url, port, child, stop };
    } catch {
      // not listening yet
    }
    if (performance.now() > end) {
      stop();
      throw new Error(`llama-server did not become healthy in ${healthyWithinMs / 1000} s`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
