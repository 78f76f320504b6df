// What the run ran on, recorded beside every result (seed-scenario §3.5: attach the configuration).
import { arch, cpus, hostname, platform, release, totalmem } from "node:os";

export function collectEnvironment(extra: Record<string, unknown> = {}): Record<string, unknown> {
  const c = cpus();
  return {
    inferscope: "0.1.0",
    node: process.version,
    platform: platform(),
    release: release(),
    arch: arch(),
    host: hostname(),
    cpus: c.length,
    cpuModel: c[0]?.model ?? null,
    memoryBytes: totalmem(),
    ...extra,
  };
}
