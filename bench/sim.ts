// bench:sim — tokens/s the simulator serves on one core with --speed zero at 1, 100 and 1,000
// concurrent streams (target >= 200k tok/s at 1,000), and memory per open stream.
// The sim runs as a child process; the client is a lean raw-socket SSE counter.
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { spawnSim } from "../test/helpers/sim.ts";

const LEVELS = [
  { streams: 1, tokens: 20_000 },
  { streams: 100, tokens: 2_000 },
  { streams: 1000, tokens: 400 },
];
const REPEATS = 3;
const TARGET_AT_1000 = 200_000;

function requestBytes(port: number, tokens: number): Buffer {
  const body = JSON.stringify({ prompt: "bench", max_tokens: tokens, ignore_eos: true, stream: true });
  return Buffer.from(
    `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

// Every SSE event starts with "data: " (generated text never contains it); chunked framing sits between events.
const SEP = Buffer.from("data: ");

/** Opens `n` streams and resolves with the token events received and the wall time taken. */
function drive(port: number, n: number, tokens: number, limitMs: number): Promise<{ events: number; ms: number }> {
  const req = requestBytes(port, tokens);
  return new Promise((resolve) => {
    let events = 0;
    let open = n;
    const t0 = performance.now();
    const sockets: Socket[] = [];
    const finish = () => {
      clearTimeout(timer);
      for (const s of sockets) s.destroy();
      resolve({ events, ms: performance.now() - t0 });
    };
    const timer = setTimeout(finish, limitMs);
    for (let i = 0; i < n; i++) {
      const s = connect(port, "127.0.0.1", () => s.write(req));
      s.setNoDelay(true);
      sockets.push(s);
      let tail: Buffer = Buffer.alloc(0);
      s.on("data", (b: Buffer) => {
        const buf = tail.length ? Buffer.concat([tail, b]) : b;
        let at = buf.indexOf(SEP);
        while (at >= 0) {
          events++;
          at = buf.indexOf(SEP, at + SEP.length);
        }
        tail = buf.subarray(Math.max(0, buf.length - SEP.length + 1));
      });
      s.on("close", () => {
        if (--open === 0) finish();
      });
      s.on("error", () => {});
    }
  });
}

/** CPU seconds (user + system) the process has used, from /proc (clock ticks of 10 ms). */
function cpuS(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) : Number.NaN;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const big = ["--set", "engine.numGpuBlocks=400000"]; // enough KV: measure serving, not preemption
const sim = await spawnSim(["--speed", "zero", "--max-num-seqs", "1024", "--max-num-batched-tokens", "65536", ...big], {
  timeoutMs: 60_000,
});
try {
  console.log("inferscope sim --speed zero (one process = one core). Medians of 3 runs.");
  console.log("wall tok/s depends on what else runs on the machine; tok per sim CPU-second is the one-core capacity.");
  console.log("streams   wall tok/s   tok per sim CPU-s   (runs, wall)");
  let at1000 = 0;
  for (const { streams, tokens } of LEVELS) {
    const rates: number[] = [];
    const perCpu: number[] = [];
    for (let r = 0; r < REPEATS; r++) {
      const c0 = cpuS(sim.pid);
      const { events, ms } = await drive(sim.port, streams, tokens, 20_000);
      const cpu = cpuS(sim.pid) - c0;
      rates.push((events / ms) * 1000);
      perCpu.push(cpu > 0 ? events / cpu : Number.NaN);
    }
    const m = median(perCpu);
    if (streams === 1000) at1000 = m;
    console.log(
      `${String(streams).padStart(7)}  ${median(rates).toFixed(0).padStart(11)}  ${m.toFixed(0).padStart(18)}   (${rates.map((x) => x.toFixed(0)).join(" ")})`,
    );
  }
  console.log(
    `target at 1000 streams: ${TARGET_AT_1000} tok/s on one core; ratio ${(at1000 / TARGET_AT_1000).toFixed(2)}`,
  );
} finally {
  await sim.stop();
}

// Memory per open stream: 1000 streams held open mid-generation on the model clock.
const slow = await spawnSim(
  ["--profile", "llama3-8b-1xh100", "--max-num-seqs", "1024", "--max-num-batched-tokens", "65536"],
  {
    timeoutMs: 60_000,
  },
);
try {
  const before = rssKb(slow.pid);
  const req = requestBytes(slow.port, 100_000);
  const sockets: Socket[] = [];
  for (let i = 0; i < 1000; i++) {
    const s = connect(slow.port, "127.0.0.1", () => s.write(req));
    s.on("data", () => {});
    s.on("error", () => {});
    sockets.push(s);
  }
  await new Promise((r) => setTimeout(r, 3000));
  const during = rssKb(slow.pid);
  for (const s of sockets) s.destroy();
  console.log(
    `memory: RSS ${before} kB idle, ${during} kB with 1000 open streams -> ${((during - before) / 1000).toFixed(1)} kB per open stream`,
  );
} finally {
  await slow.stop();
}
