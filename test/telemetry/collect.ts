// What the live-source tests hand a source: its samples and notes as they come, and until(cond), which resolves
// as soon as a sample or note makes cond true (no polling, no sleeps), or fails naming what it waited for.
import type { TelemetrySample } from "../../src/telemetry/types.ts";

export function collector() {
  const samples: TelemetrySample[] = [];
  const notes: string[] = [];
  let wake: (() => void) | null = null;
  let cond: () => boolean = () => false;
  const poke = () => {
    if (wake && cond()) {
      const w = wake;
      wake = null;
      w();
    }
  };
  return {
    samples,
    notes,
    onSample: (s: TelemetrySample) => {
      samples.push(s);
      poke();
    },
    onNote: (n: string) => {
      notes.push(n);
      poke();
    },
    until(c: () => boolean, what: string, ms = 20_000): Promise<void> {
      cond = c;
      if (c()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    },
  };
}
