// File readers for the model command: config.json, .gguf headers, hardware YAML, nvidia-smi topo, measurement
// files. The only module here that touches the file system; everything it returns is plain data for pure code.
import { closeSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { InputError, UsageError } from "../errors.ts";
import { yaml } from "../lazy.ts";
import type { Architecture } from "./architecture.ts";
import { fromHfConfig } from "./architecture.ts";
import { GgufNeedMore, ggufToArchitecture, parseGgufHeader } from "./gguf.ts";
import type { CustomGpuSpec } from "./hardware.ts";
import type { Measurement } from "./measurements.ts";
import { parseMeasurementsText } from "./measurements.ts";
import type { Topology } from "./topology.ts";
import { parseTopo } from "./topology.ts";

function readText(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === "ENOENT") throw new InputError(`${file}: no such file`);
    if (e.code === "EISDIR") throw new InputError(`${file}: is a directory`);
    throw new InputError(`${file}: ${e.message}`);
  }
}

function parseJson(text: string, file: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    const msg = (err as Error).message;
    const m = /position (\d+)/.exec(msg);
    if (m) {
      const pos = Number(m[1]);
      const before = text.slice(0, pos);
      const line = before.split("\n").length;
      const column = pos - before.lastIndexOf("\n");
      throw new InputError(`invalid JSON: ${msg.replace(/ in JSON at position \d+.*$/, "")}`, {
        position: { file, line, column },
      });
    }
    throw new InputError(`${file}: invalid JSON: ${msg}`);
  }
}

/** A model argument: catalog name (returned as is), config.json (or a folder holding one), or a .gguf file. */
export function loadModelArg(arg: string): string | Architecture {
  let st: ReturnType<typeof statSync> | undefined;
  try {
    st = statSync(arg);
  } catch {
    if (/[/\\]|\.json$|\.gguf$/i.test(arg)) throw new InputError(`${arg}: no such file`);
    return arg;
  }
  if (st.isDirectory()) {
    const file = join(arg, "config.json");
    return fromHfConfig(parseJson(readText(file), file), file);
  }
  if (/\.gguf$/i.test(arg)) return loadGguf(arg);
  return fromHfConfig(parseJson(readText(arg), arg), arg);
}

/** Reads just enough of a .gguf file for its header (metadata + tensor infos), growing the read as needed. */
export function loadGguf(file: string): Architecture {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (err) {
    throw new InputError(
      `${file}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message}`,
    );
  }
  try {
    const size = statSync(file).size;
    let want = Math.min(size, 8 * 1024 * 1024);
    for (;;) {
      const buf = Buffer.alloc(want);
      const got = readSync(fd, buf, 0, want, 0);
      try {
        const header = parseGgufHeader(buf.subarray(0, got), file);
        return ggufToArchitecture(header, file);
      } catch (err) {
        if (err instanceof GgufNeedMore && got < size) {
          want = Math.min(size, want * 4);
          continue;
        }
        if (err instanceof GgufNeedMore)
          throw new InputError(`${file}: truncated GGUF header (file ends at byte ${size})`);
        throw err;
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** Hardware YAML/JSON: { gpu: {name, base, bandwidth, tflopsBf16, memory, measuredBandwidth}, gpus, interconnect }. */
export function loadHardwareFile(file: string): { gpu: CustomGpuSpec; gpus?: number; interconnect?: string } {
  const text = readText(file);
  let doc: unknown;
  try {
    doc = yaml().parse(text, { prettyErrors: true });
  } catch (err) {
    const e = err as { linePos?: { line: number; col: number }[]; message: string };
    const pos = e.linePos?.[0];
    throw new InputError(`invalid YAML: ${e.message.split("\n")[0]}`, {
      position: pos ? { file, line: pos.line, column: pos.col } : undefined,
    });
  }
  if (!doc || typeof doc !== "object") throw new InputError(`${file}: expected a mapping with a "gpu" entry`);
  const d = doc as Record<string, unknown>;
  const g = (d.gpu ?? d.device ?? d) as Record<string, unknown>;
  const spec: CustomGpuSpec = {
    name: typeof g.name === "string" ? g.name : undefined,
    base: typeof g.base === "string" ? g.base : undefined,
    bandwidth: (g.bandwidth ?? g.memory_bandwidth ?? g.bandwidthGBs) as string | number | undefined,
    measuredBandwidth: (g.measuredBandwidth ?? g.measured_bandwidth) as string | number | undefined,
    tflopsBf16: num(g.tflopsBf16 ?? g.tflops_bf16),
    tflopsFp8: num(g.tflopsFp8 ?? g.tflops_fp8),
    tflopsFp4: num(g.tflopsFp4 ?? g.tflops_fp4),
    memory: (g.memory ?? g.memoryGB) as string | number | undefined,
    nvlink: typeof g.nvlink === "boolean" ? g.nvlink : undefined,
    pcieGen: num(g.pcieGen ?? g.pcie_gen),
    sm: num(g.sm),
  };
  if (spec.bandwidth === undefined && spec.base === undefined)
    throw new InputError(`${file}: gpu needs "bandwidth" (e.g. 936GB/s) or "base" (a catalog GPU)`);
  return {
    gpu: spec,
    gpus: num(d.gpus),
    interconnect: typeof d.interconnect === "string" ? d.interconnect : undefined,
  };
}

function num(v: unknown): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v))) return Number(v);
  return undefined;
}

export function loadTopo(file: string): Topology {
  return parseTopo(readText(file), file);
}

/** Measurements from JSON/YAML, a bench --save-result JSON, or nccl-tests all_reduce_perf output. */
export function loadMeasurements(file: string): Measurement[] {
  return parseMeasurementsText(readText(file), file);
}

export function loadJson(file: string): unknown {
  return parseJson(readText(file), file);
}

export function requireFileArg(flag: string, v: string | undefined): string {
  if (!v) throw new UsageError(`${flag} needs a file path`);
  return v;
}
