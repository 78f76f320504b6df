// CPU hosts (llama.cpp): the busy share of all CPUs from /proc/stat over each interval, and package
// energy from RAPL (/sys/class/powercap/intel-rapl:N/energy_uj, which wraps at max_energy_range_uj).
// What cannot be read is said in capture.unavailable with why — never reported as a zero.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { TelemetryError } from "../../errors.ts";
import {
  CaptureBuilder,
  captureHandle,
  pollGrid,
  type SourceStartOptions,
  type TelemetryHandle,
  type TelemetrySource,
} from "./common.ts";
import { findListeningProcess, ProcessSchedstat } from "./proc.ts";

export interface CpuSourceOptions {
  /** Default /proc/stat. */
  procStat?: string;
  /** Default /sys/class/powercap. */
  powercapRoot?: string;
  /** Default /proc: where the server process is looked up and read. */
  procRoot?: string;
  /** The target's port on this host: the process listening there is the server whose threads are read. */
  serverPort?: number;
}

/** Jiffies from the aggregate `cpu` line: busy is everything but idle and iowait. */
export function readCpuTimes(text: string): { busy: number; total: number } | null {
  const line = text.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) return null;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  if (f.length < 4 || f.some((x) => !Number.isFinite(x))) return null;
  // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already in user.
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = f[3]! + (f[4] ?? 0);
  return { busy: total - idle, total };
}

interface RaplZone {
  key: string;
  energyPath: string;
  /** The counter's range in µJ: it wraps to 0 past it. */
  rangeUj: number;
  lastUj: number;
  /** Unwrapped energy since the first reading, J; plus the first reading so the counter stays cumulative. */
  totalJ: number;
}

/** The package zones (top-level intel-rapl:N named package-*): subzones (core, uncore, dram) are inside them. */
export function findRaplZones(root: string): { zones: RaplZone[]; why?: string } {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return {
      zones: [],
      why: code === "ENOENT" ? `${root} not present (no RAPL on this host or in this VM)` : `${root}: ${code}`,
    };
  }
  const tops = names.filter((n) => /^intel-rapl:\d+$/.test(n)).sort();
  if (tops.length === 0) return { zones: [], why: `${root} has no intel-rapl:N package zones` };
  const zones: RaplZone[] = [];
  const problems: string[] = [];
  for (const n of tops) {
    const dir = join(root, n);
    let name: string;
    try {
      name = readFileSync(join(dir, "name"), "utf8").trim();
    } catch {
      name = n;
    }
    if (!name.startsWith("package")) continue; // psys would double count the packages
    try {
      const uj = Number(readFileSync(join(dir, "energy_uj"), "utf8").trim());
      const rangeUj = Number(readFileSync(join(dir, "max_energy_range_uj"), "utf8").trim());
      if (!Number.isFinite(uj) || !(rangeUj > 0)) {
        problems.push(`${dir}: unreadable counter values`);
        continue;
      }
      zones.push({ key: name, energyPath: join(dir, "energy_uj"), rangeUj, lastUj: uj, totalJ: uj / 1e6 });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      problems.push(
        code === "EACCES" || code === "EPERM"
          ? `permission denied reading ${join(dir, "energy_uj")} (root-only since Linux 5.10; run as root or chmod it)`
          : `${join(dir, "energy_uj")}: ${code ?? (err as Error).message}`,
      );
    }
  }
  if (zones.length === 0) return { zones, why: problems.join("; ") || `${root}: no package zone` };
  return { zones, why: problems.length ? problems.join("; ") : undefined };
}

/** One RAPL reading with the wrap undone: a counter that went down passed max_energy_range_uj once. */
export function advanceRapl(z: RaplZone, uj: number): number {
  const delta = uj >= z.lastUj ? uj - z.lastUj : uj + z.rangeUj - z.lastUj;
  z.lastUj = uj;
  z.totalJ += delta / 1e6;
  return z.totalJ;
}

export function cpuSource(o: CpuSourceOptions = {}): TelemetrySource {
  return { kind: "cpu", start: (opts) => startCpu(o, opts) };
}

async function startCpu(o: CpuSourceOptions, opts: SourceStartOptions): Promise<TelemetryHandle> {
  const now = opts.now ?? Date.now;
  const procStat = o.procStat ?? "/proc/stat";
  const root = o.powercapRoot ?? "/sys/class/powercap";
  const readStat = () => {
    const t = readCpuTimes(readFileSync(procStat, "utf8"));
    if (!t) throw new Error(`${procStat}: no aggregate "cpu" line`);
    return t;
  };
  let prev: { busy: number; total: number };
  try {
    prev = readStat();
  } catch (err) {
    throw new TelemetryError(`--telemetry cpu: cannot read ${procStat}: ${(err as Error).message}`, {
      hint: "the cpu source reads Linux's /proc/stat",
    });
  }
  const cap = new CaptureBuilder("cpu", `${procStat}; RAPL ${root}`, opts.intervalMs, opts);
  const { zones, why } = findRaplZones(root);
  if (zones.length === 0) cap.missing("energyJ", `RAPL unavailable: ${why}`);
  else if (why) cap.note(`RAPL: ${why}`);
  cap.device({ key: "cpu" });
  for (const z of zones) cap.device({ key: z.key });
  if (zones.length === 0) cap.missing("powerW", `no RAPL energy counter to take a rate of: ${why}`);
  // The server's own threads: CPU time and run-queue wait (contention), where the process can be found.
  let server: ProcessSchedstat | null = null;
  if (o.serverPort !== undefined) {
    const found = findListeningProcess(o.serverPort, o.procRoot ?? "/proc");
    if (found.pid === null) cap.missing("serverRunQueue", `the server process is not readable: ${found.why}`);
    else {
      server = new ProcessSchedstat(found.pid, o.procRoot ?? "/proc");
      cap.device({ key: "cpu/server", name: `${found.command} (pid ${found.pid})` });
    }
  }
  let serverGone = false;
  const readServer = (t: number) => {
    if (!server || serverGone) return;
    const r = server.read();
    if (r) cap.add({ t, device: "cpu/server", serverCpuS: r.runS, serverRunQueueS: r.waitS });
    else {
      serverGone = true;
      cap.note(`server process ${server.pid} exited mid-run: its CPU time stops at the last reading`);
    }
  };

  let statFailed = false;
  const tick = async () => {
    const t = now() / 1000;
    try {
      const cur = readStat();
      const dTotal = cur.total - prev.total;
      // Jiffies tick at 100 Hz: an interval with no tick says nothing (not 0 % busy).
      if (dTotal > 0) cap.add({ t, device: "cpu", cpuBusy: (cur.busy - prev.busy) / dTotal });
      prev = cur;
    } catch (err) {
      if (!statFailed) cap.note(`cpu: ${procStat} unreadable mid-run: ${(err as Error).message}`);
      statFailed = true;
    }
    readServer(t);
    for (const z of zones) {
      try {
        const uj = Number(readFileSync(z.energyPath, "utf8").trim());
        if (Number.isFinite(uj)) cap.add({ t, device: z.key, energyJ: advanceRapl(z, uj) });
      } catch (err) {
        cap.note(`RAPL ${z.energyPath} unreadable mid-run: ${(err as NodeJS.ErrnoException).code ?? err}`);
      }
    }
  };
  // The first energy reading is the baseline sample; busy needs a second /proc/stat reading.
  const t0 = now() / 1000;
  for (const z of zones) cap.add({ t: t0, device: z.key, energyJ: z.totalJ });
  readServer(t0);

  const ac = new AbortController();
  const onAbort = () => ac.abort();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  if (opts.signal?.aborted) ac.abort();
  let first = true;
  const loop = pollGrid(opts.intervalMs, ac.signal, now, async () => {
    if (first) {
      first = false; // grid point 0 is the baseline just read
      return;
    }
    await tick();
  });
  return captureHandle("cpu", cap, async () => {
    opts.signal?.removeEventListener("abort", onAbort);
    const aborted = ac.signal.aborted;
    ac.abort();
    await loop;
    // A last reading closes the window at stop, unless an abort already ended the recording.
    if (!aborted) await tick();
    return cap.build();
  });
}
