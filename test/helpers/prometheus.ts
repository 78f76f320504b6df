// Starts a real Prometheus (/usr/bin/prometheus) on a free 127.0.0.1 port with a temp config and data
// dir, scraping the given targets. Reusable by any e2e test; always stop() it (a finally or after()).
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? "/usr/bin/prometheus";

export interface ScrapeTarget {
  job: string;
  /** host:port */
  target: string;
  metricsPath?: string;
  /** Extra labels on every series from this target. */
  labels?: Record<string, string>;
}

export interface PrometheusHandle {
  url: string;
  port: number;
  dataDir: string;
  /** Everything Prometheus printed, for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

/** Why e2e tests cannot run here, or undefined when they can. CI sets INFERSCOPE_REQUIRE_E2E: then never skip. */
export function prometheusSkipReason(): string | undefined {
  if (existsSync(PROMETHEUS_BIN)) return undefined;
  if (process.env.INFERSCOPE_REQUIRE_E2E)
    throw new Error(`${PROMETHEUS_BIN} is missing but INFERSCOPE_REQUIRE_E2E is set (apt-get install prometheus)`);
  return `SKIPPED: ${PROMETHEUS_BIN} not installed (apt-get install prometheus); set INFERSCOPE_REQUIRE_E2E to make this fail`;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export async function startPrometheus(opts: {
  targets: ScrapeTarget[];
  /** Default "1s". */
  scrapeInterval?: string;
  /** How long to wait for /-/ready (ms); default 15000. */
  readyTimeoutMs?: number;
  /** More flags, e.g. --web.enable-remote-write-receiver. */
  extraArgs?: string[];
}): Promise<PrometheusHandle> {
  const interval = opts.scrapeInterval ?? "1s";
  const dataDir = mkdtempSync(join(tmpdir(), "inferscope-prom-"));
  const cfg = [
    "global:",
    `  scrape_interval: ${interval}`,
    `  scrape_timeout: ${interval}`,
    `  evaluation_interval: ${interval}`,
    "scrape_configs:",
    ...opts.targets.flatMap((t) => [
      `  - job_name: ${JSON.stringify(t.job)}`,
      `    metrics_path: ${JSON.stringify(t.metricsPath ?? "/metrics")}`,
      "    static_configs:",
      `      - targets: [${JSON.stringify(t.target)}]`,
      ...(t.labels
        ? ["        labels:", ...Object.entries(t.labels).map(([k, v]) => `          ${k}: ${JSON.stringify(v)}`)]
        : []),
    ]),
  ].join("\n");
  const cfgPath = join(dataDir, "prometheus.yml");
  writeFileSync(cfgPath, `${cfg}\n`);
  let out = "";
  let child: ChildProcess | undefined;
  let port = 0;
  // A port can be taken between probing and binding: retry a couple of times.
  for (let attempt = 0; attempt < 3; attempt++) {
    port = await freePort();
    child = spawn(
      PROMETHEUS_BIN,
      [
        `--config.file=${cfgPath}`,
        `--storage.tsdb.path=${join(dataDir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
        "--storage.tsdb.retention.time=1h",
        ...(opts.extraArgs ?? []),
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const ok = await waitReady(`http://127.0.0.1:${port}`, child, opts.readyTimeoutMs ?? 15_000);
    if (ok) break;
    child.kill("SIGKILL");
    child = undefined;
    if (!/address already in use/.test(out)) break;
  }
  if (!child) {
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`prometheus did not become ready:\n${out.slice(-2000)}`);
  }
  const proc = child;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    log: () => out,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise<void>((r) => proc.once("exit", () => r()));
        proc.kill("SIGTERM");
        const timer = setTimeout(() => proc.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function waitReady(url: string, child: ChildProcess, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) return false;
    try {
      const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}
