// Installs replay-nvidia-smi.mjs as an executable named `nvidia-smi` in a directory (a temp PATH entry).
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/cli.ts";

export function installReplayNvidiaSmi(dir: string): string {
  const bin = join(dir, "nvidia-smi");
  const script = join(ROOT, "test", "telemetry", "replay-nvidia-smi.mjs");
  writeFileSync(bin, `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`);
  chmodSync(bin, 0o755);
  return bin;
}
