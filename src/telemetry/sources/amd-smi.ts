// AMD GPUs: `amd-smi metric --json`, run once per interval (each run in its own process group). amd-smi
// has no CSV loop like nvidia-smi's -lms, and one run takes a few hundred ms, so intervals under ~1 s
// skip grid points (counted as missing). rocm-smi (the older tool) is not read.
import { TelemetryError } from "../../errors.ts";
import { parseAmdSmiJson } from "../amdsmi.ts";
import {
  CaptureBuilder,
  findOnPath,
  pollingHandle,
  runOnce,
  type SourceStartOptions,
  type TelemetryHandle,
  type TelemetrySource,
} from "./common.ts";

export interface AmdSmiOptions {
  binary?: string;
  /** PATH searched when no binary is given (default process.env.PATH). */
  path?: string;
  /** Per-run limit (ms); default 10 s. */
  timeoutMs?: number;
}

const ARGS = ["metric", "--json"];

export function amdSmiSource(o: AmdSmiOptions = {}): TelemetrySource {
  return { kind: "amd-smi", start: (opts) => startAmdSmi(o, opts) };
}

async function startAmdSmi(o: AmdSmiOptions, opts: SourceStartOptions): Promise<TelemetryHandle> {
  const bin = o.binary ?? findOnPath("amd-smi", o.path ?? process.env.PATH ?? "");
  if (!bin)
    throw new TelemetryError("--telemetry amd-smi: amd-smi is not on PATH; nothing was measured", {
      hint: "install amd-smi-lib (ROCm), read an exporter with --telemetry prometheus:URL, or use --telemetry none",
    });
  const now = opts.now ?? Date.now;
  const limit = o.timeoutMs ?? 10_000;
  const cap = new CaptureBuilder("amd-smi", `${bin} ${ARGS.join(" ")}`, opts.intervalMs, opts);

  const readOnce = async (signal?: AbortSignal) => {
    const before = now();
    const r = await runOnce(bin, ARGS, limit, signal);
    if (r.timedOut) throw new Error(`no answer within ${limit} ms`);
    if (r.code !== 0) throw new Error(`exit ${r.code ?? r.signal}: ${r.out.trim().split("\n").slice(-1)[0] ?? ""}`);
    // The reading falls somewhere inside the run: its midpoint.
    return parseAmdSmiJson(r.stdout, { file: `${bin} ${ARGS.join(" ")}`, timeS: (before + now()) / 2000 });
  };
  const take = (r: Awaited<ReturnType<typeof readOnce>>) => {
    for (const d of r.devices) cap.device(d);
    for (const s of r.samples) cap.add(s);
  };
  let first: Awaited<ReturnType<typeof readOnce>>;
  try {
    first = await readOnce();
  } catch (err) {
    throw new TelemetryError(`--telemetry amd-smi: ${bin} ${ARGS.join(" ")} failed: ${(err as Error).message}`);
  }
  if (first.samples.length === 0)
    throw new TelemetryError(`--telemetry amd-smi: ${bin} ${ARGS.join(" ")} listed no GPU`);
  take(first);
  // What the first reading could not give (no energy counter, no clock event reasons) stays so: amd-smi's
  // output does not change shape between runs.
  for (const u of first.unavailable) cap.missing(u.field, u.why);

  return pollingHandle({
    kind: "amd-smi",
    cap,
    opts,
    gapWhat: "amd-smi failing",
    async poll(signal) {
      const r = await readOnce(signal);
      if (!signal.aborted) take(r);
    },
    reason: (err) => (err as Error).message,
  });
}
