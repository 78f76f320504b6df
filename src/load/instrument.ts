// bench:client's instruments, run inside every event loop that reads streams (this thread, or each
// worker thread): the added-delay probe's reader and the heap window. A loop's own delay is only seen
// from inside that loop, so a probe on an idle main thread says nothing about the workers'.
import net from "node:net";
import { runInNewContext } from "node:vm";
import { hrMs } from "./clock.ts";
import { HeapWindow, type HeapWindowResult } from "./heapwindow.ts";

/** CLOCK_MONOTONIC in ms (process.hrtime is system-wide on Linux: comparable across threads and processes). */
export const hrNowMs = hrMs;

/**
 * Reads the probe (one line per event: its CLOCK_MONOTONIC write time in ns) on a raw socket into a
 * buffer of its own and stamps each line on receipt: no string, Buffer or boxed number per event, so it adds
 * no garbage to the loop it measures.
 */
export class ProbeReader {
  private readonly sock: net.Socket;
  private at = new Float64Array(4096);
  private delay = new Float64Array(4096);
  private n = 0;
  private v = 0;
  private digits = 0;
  readonly connected: Promise<void>;

  constructor(port: number) {
    const buf = Buffer.allocUnsafe(4096);
    this.sock = net.connect({
      host: "127.0.0.1",
      port,
      noDelay: true,
      onread: { buffer: buf, callback: (len: number, b: Uint8Array) => this.onBytes(b, len) },
    });
    this.connected = new Promise((resolve, reject) => {
      this.sock.once("connect", () => resolve());
      this.sock.once("error", (e) => reject(new Error(`cannot read the delay probe: ${e.message}`)));
    });
    this.sock.on("error", () => {});
    // A run that fails before report() must not be kept alive by its probe.
    this.sock.unref();
  }

  private onBytes(b: Uint8Array, len: number): boolean {
    const now = hrMs();
    for (let i = 0; i < len; i++) {
      const c = b[i]!;
      if (c >= 0x30 && c <= 0x39) {
        this.v = this.v * 10 + (c - 0x30);
        this.digits++;
      } else if (c === 0x0a && this.digits > 0) {
        const w = this.v / 1e6;
        if (this.n === this.at.length) this.grow();
        this.at[this.n] = w;
        this.delay[this.n] = now - w;
        this.n++;
        this.v = 0;
        this.digits = 0;
      }
    }
    return true;
  }

  private grow(): void {
    const a = new Float64Array(this.at.length * 2);
    a.set(this.at);
    this.at = a;
    const d = new Float64Array(this.delay.length * 2);
    d.set(this.delay);
    this.delay = d;
  }

  /** Stops reading; the events written in [fromHr, toHr] (hrtime ms; all when omitted). */
  stop(fromHr = Number.NEGATIVE_INFINITY, toHr = Number.POSITIVE_INFINITY): ProbeEvents {
    this.sock.destroy();
    let k = 0;
    for (let i = 0; i < this.n; i++) if (this.at[i]! >= fromHr && this.at[i]! <= toHr) k++;
    const at = new Float64Array(k);
    const delay = new Float64Array(k);
    k = 0;
    for (let i = 0; i < this.n; i++)
      if (this.at[i]! >= fromHr && this.at[i]! <= toHr) {
        at[k] = this.at[i]!;
        delay[k++] = this.delay[i]!;
      }
    return { writtenHrMs: at, delayMs: delay };
  }
}

/** Probe events: each one's write time (hrtime ms) and the wait until this loop stamped it (ms). */
export interface ProbeEvents {
  writtenHrMs: Float64Array;
  delayMs: Float64Array;
}

/** What to measure in each reading loop. */
export interface InstrumentSpec {
  /** The probe server's port (delay.ts startProbe), or null for no probe. */
  probePort: number | null;
  /** Sample this loop's heap at the window's edges (bytes allocated, collections). */
  heap: boolean;
  /**
   * Collect garbage as the window opens, after the run's setup (connections, request bodies, handlers):
   * what setup made is then promoted before the window, not by the window's collections. Needs
   * --expose-gc (bench:client sets it); ignored without it.
   */
  collect?: boolean;
}

/** One reading loop's measurements over its window (the run's clock start to its last request's end). */
export interface LoopReport {
  /** 0 for this thread, else the worker thread's shard number. */
  loop: number;
  /** The window on the hrtime clock (ms). */
  fromHrMs: number;
  toHrMs: number;
  probe: ProbeEvents | null;
  heap: HeapWindowResult | null;
}

/** Set up before a loop's clock starts; begin() and end() mark its window; report() after it. */
export class LoopInstrument {
  private readonly probe: ProbeReader | null;
  private readonly heap: HeapWindow | null;
  private from = Number.NaN;
  private to = Number.NaN;
  private heapResult: HeapWindowResult | null = null;

  constructor(
    readonly loop: number,
    spec: InstrumentSpec,
  ) {
    this.probe = spec.probePort !== null ? new ProbeReader(spec.probePort) : null;
    this.heap = spec.heap ? new HeapWindow() : null;
    const gc = spec.collect ? (runInNewContext("typeof gc === 'function' ? gc : null") as (() => void) | null) : null;
    this.gc = gc;
  }

  private readonly gc: (() => void) | null;

  /** Resolves once the probe is connected (before the run's clock starts). */
  ready(): Promise<void> {
    return this.probe ? this.probe.connected : Promise.resolve();
  }

  begin(): void {
    if (!Number.isNaN(this.from)) return;
    this.gc?.();
    this.heap?.start();
    this.from = hrNowMs();
  }

  end(): void {
    if (Number.isNaN(this.from) || !Number.isNaN(this.to)) return;
    this.to = hrNowMs();
    this.heapResult = this.heap?.end() ?? null;
  }

  report(): LoopReport {
    this.end();
    return {
      loop: this.loop,
      fromHrMs: this.from,
      toHrMs: this.to,
      probe: this.probe ? this.probe.stop(this.from, this.to) : null,
      heap: this.heapResult,
    };
  }
}
