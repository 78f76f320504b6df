// Spawns `inferscope sim` as a real child process on a free loopback port, for tests.
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const bin = join(root, "bin", "inferscope.mjs");

export interface SpawnedSim {
  url: string;
  port: number;
  pid: number;
  /** Sends SIGTERM and waits for the process to exit; resolves to its exit code. */
  stop(): Promise<number | null>;
}

/**
 * Starts `node bin/inferscope.mjs sim --port 0 --json ...args` and resolves once it prints its
 * listening line. Rejects with the child's stderr if it exits first, or after 15 s.
 */
export function spawnSim(
  args: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<SpawnedSim> {
  const child = spawn(process.execPath, [bin, "sim", "--port", "0", "--json", ...args], {
    cwd: root,
    env: { ...process.env, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  let stdout = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise<SpawnedSim>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`inferscope sim did not start within ${opts.timeoutMs ?? 15000} ms; stderr:\n${stderr}`));
    }, opts.timeoutMs ?? 15_000);
    const early = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      reject(new Error(`inferscope sim exited (code ${code}, signal ${signal}) before listening; stderr:\n${stderr}`));
    };
    child.once("exit", early);
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      stdout += d;
      const nl = stdout.indexOf("\n");
      if (nl < 0) return;
      clearTimeout(timer);
      let ev: { event?: string; url?: string };
      try {
        ev = JSON.parse(stdout.slice(0, nl));
      } catch {
        child.kill("SIGKILL");
        reject(new Error(`unexpected first line from inferscope sim: ${stdout.slice(0, nl)}`));
        return;
      }
      child.stdout.removeAllListeners("data");
      child.stdout.resume();
      child.off("exit", early);
      const url = ev.url!;
      resolve({
        url,
        port: Number(new URL(url).port),
        pid: child.pid!,
        stop: () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
          return exited;
        },
      });
    });
  });
}
