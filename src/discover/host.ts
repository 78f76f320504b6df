// This machine, for a server that runs on it: CPU, cores, memory, GPU device nodes, and a short
// one-thread copy-bandwidth measurement. Also the file checks discovery needs (I/O).
import { existsSync, readdirSync, statSync } from "node:fs";
import { availableParallelism, cpus, totalmem } from "node:os";
import { join, resolve } from "node:path";
import type { HostFacts } from "./detect.ts";

/** Whether a URL points at this machine. */
export function isLocalUrl(url: string): boolean {
  try {
    const h = new URL(url).hostname.replace(/^\[|\]$/g, "");
    return h === "localhost" || h === "::1" || /^127\./.test(h);
  } catch {
    return false;
  }
}

function hasGpuDevice(): boolean {
  try {
    if (existsSync("/dev/nvidia0") || existsSync("/proc/driver/nvidia/gpus")) return true;
    // AMD: /dev/kfd plus a render node
    if (
      existsSync("/dev/kfd") &&
      existsSync("/dev/dri") &&
      readdirSync("/dev/dri").some((n) => n.startsWith("renderD"))
    )
      return true;
  } catch {
    // unreadable /dev: treat as no GPU found
  }
  return false;
}

/**
 * Copy bandwidth of one thread, GB/s (bytes read + written per second): the median of 5 copies of
 * 64 MiB after one warm-up. A floor for what one llama.cpp thread can stream, not the socket's peak.
 */
export function measureCopyBandwidthGBs(mib = 64, reps = 5): number {
  const n = mib << 20;
  const a = Buffer.alloc(n, 1);
  const b = Buffer.alloc(n);
  a.copy(b);
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    a.copy(b);
    times.push(performance.now() - t0);
  }
  times.sort((x, y) => x - y);
  const ms = times[Math.floor(times.length / 2)]!;
  return (2 * n) / (ms / 1000) / 1e9;
}

export function hostFacts(opts: { measure?: boolean } = {}): HostFacts {
  const c = cpus();
  return {
    cpuModel: (c[0]?.model ?? "unknown CPU").replace(/\s+/g, " ").trim(),
    cores: availableParallelism(),
    memoryGB: Math.round((totalmem() / 1e9) * 10) / 10,
    hasGpu: hasGpuDevice(),
    copyBandwidthGBs: opts.measure === false ? undefined : Math.round(measureCopyBandwidthGBs() * 10) / 10,
  };
}

/**
 * A model location that can be read here: a .gguf file, a config.json, or a folder holding one.
 * Relative paths are tried against `cwd` (where the server was started). Returns the path to pass to
 * the model resolver, or null.
 */
export function readableModel(path: string, cwd = process.cwd()): string | null {
  if (!path || /^[a-z]+:\/\//i.test(path)) return null;
  const p = resolve(cwd, path);
  try {
    const st = statSync(p);
    if (st.isFile() && (/\.gguf$/i.test(p) || /config\.json$/i.test(p))) return path;
    if (st.isDirectory() && existsSync(join(p, "config.json"))) return join(path, "config.json");
  } catch {
    // not here
  }
  return null;
}
