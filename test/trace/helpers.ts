// Hand-built Kineto-style traces for the trace tests.
import { writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";

export interface Ev {
  [k: string]: unknown;
}

export class TraceBuilder {
  events: Ev[] = [];
  private corr = 1000;
  private ext = 1;
  /** Metadata written after traceEvents, as Kineto does. */
  trailing: Record<string, unknown> = { traceName: "test.pt.trace.json" };
  leading: Record<string, unknown> = { schemaVersion: 1, deviceProperties: [{ id: 0, name: "NVIDIA H100 80GB HBM3" }] };

  annotation(name: string, ts: number, dur: number, tid = 100): this {
    this.events.push({
      ph: "X",
      cat: "user_annotation",
      name,
      pid: 1,
      tid,
      ts,
      dur,
      args: { "External id": this.ext++ },
    });
    return this;
  }
  gpuAnnotation(name: string, ts: number, dur: number, stream = 7): this {
    this.events.push({ ph: "X", cat: "gpu_user_annotation", name, pid: 0, tid: stream, ts, dur, args: {} });
    return this;
  }
  /** A runtime launch call; returns its correlation id. */
  launch(ts: number, dur = 4, name = "cudaLaunchKernel", ext?: number): number {
    const c = this.corr++;
    this.events.push({
      ph: "X",
      cat: "cuda_runtime",
      name,
      pid: 1,
      tid: 100,
      ts,
      dur,
      args: { correlation: c, cbid: 211, ...(ext !== undefined ? { "External id": ext } : {}) },
    });
    this.events.push({ ph: "s", id: c, pid: 1, tid: 100, ts, cat: "ac2g", name: "ac2g" });
    return c;
  }
  cpuOp(name: string, ts: number, dur: number): number {
    const x = this.ext++;
    this.events.push({ ph: "X", cat: "cpu_op", name, pid: 1, tid: 100, ts, dur, args: { "External id": x } });
    return x;
  }
  kernel(
    name: string,
    ts: number,
    dur: number,
    o: { corr?: number; stream?: number; ext?: number; device?: number } = {},
  ): this {
    this.events.push({
      ph: "X",
      cat: "kernel",
      name,
      pid: o.device ?? 0,
      tid: o.stream ?? 7,
      ts,
      dur,
      args: {
        ...(o.ext !== undefined ? { "External id": o.ext } : {}),
        queued: 0,
        device: o.device ?? 0,
        context: 1,
        stream: o.stream ?? 7,
        ...(o.corr !== undefined ? { correlation: o.corr } : {}),
        grid: [132, 1, 1],
        block: [128, 1, 1],
      },
    });
    return this;
  }
  memcpy(ts: number, dur: number, corr?: number): this {
    this.events.push({
      ph: "X",
      cat: "gpu_memcpy",
      name: "Memcpy DtoH (Device -> Pinned)",
      pid: 0,
      tid: 7,
      ts,
      dur,
      args: { device: 0, stream: 7, ...(corr !== undefined ? { correlation: corr } : {}), bytes: 256 },
    });
    return this;
  }
  python(name: string, ts: number, dur: number): this {
    this.events.push({ ph: "X", cat: "python_function", name, pid: 1, tid: 100, ts, dur, args: { "Python id": 1 } });
    return this;
  }
  /** Kernel launched eagerly: a launch call at `launchTs`, the kernel at `ts`. */
  eager(name: string, launchTs: number, ts: number, dur: number, stream = 7): this {
    const c = this.launch(launchTs);
    return this.kernel(name, ts, dur, { corr: c, stream });
  }
  /** Kineto's pretty layout: one key group per line, metadata before and after traceEvents. */
  json(): string {
    const body = this.events.map((e) => `\n  ${JSON.stringify(e, null, 1).replace(/\n/g, "\n    ")}`).join(",");
    const lead = Object.entries(this.leading)
      .map(([k, v]) => `\n  "${k}": ${JSON.stringify(v)},`)
      .join("");
    const trail = Object.entries(this.trailing)
      .map(([k, v]) => `\n  "${k}": ${JSON.stringify(v)}`)
      .join(",");
    return `{${lead}\n  "traceEvents": [${body}\n  ]${trail ? `,${trail}` : ""}\n}\n`;
  }
  write(path: string, gzip = path.endsWith(".gz")): string {
    const text = this.json();
    writeFileSync(path, gzip ? gzipSync(text) : text);
    return path;
  }
}
