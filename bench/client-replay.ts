// npm run bench:client-replay — the h1 client's own CPU per read, without the kernel or the server:
// one stream of `inferscope sim` (the body the runner sends, continuous usage stats on) is recorded
// once, cut into its chunked-encoding frames (one frame a read, as the sim writes them), and replayed
// into the read callbacks of STREAMS (1,000) real h1 connections, a frame to every stream in turn,
// through the client's whole read path (h1 framing, SSE, the chunk reader, the rows). Steadier than
// bench:client's CPU per read, which is mostly the kernel's and moves with the host's load; use it to
// compare two versions of the read path (REPS runs, the median and the lowest printed).
// EVICT=1 walks 48 MB between steps, so each stream's state is out of cache at its next read, as in a
// live run where a step's 1,000 reads and the server run between two reads of a stream.

import type { AddressInfo, Socket } from "node:net";
import { connect, createServer } from "node:net";
import { codeMeasured, loadModule } from "./shipped.ts";

const { blankRecord, StreamClient, httpGet } = await loadModule<typeof import("../src/load/client.ts")>("client");
const { spawnSimProcess } = await loadModule<typeof import("../src/load/selftest.ts")>("selftest");
const { requestBody } = await loadModule<typeof import("../src/load/workload.ts")>("workload");

const STREAMS = Number(process.env.STREAMS ?? 1000);
const REPS = Number(process.env.REPS ?? 7);
const OUT_LEN = 256;
const EVICT = process.env.EVICT === "1";
const junk = new Int32Array(EVICT ? (48 << 20) / 4 : 1);

/** One streamed response of the sim, raw (head and chunked body) as it came off the socket. */
async function record(): Promise<Buffer> {
  // At model speed the sim writes each token as a chunk of its own (at --speed zero, all in one).
  const sim = await spawnSimProcess(["--profile", "llama3-8b-1xh100"], { idle: true });
  try {
    const models = JSON.parse((await httpGet(`${sim.url}/v1/models`)).body);
    const body = requestBody(
      { prompt: "hello world ".repeat(8), inputLen: 16, outputLen: OUT_LEN },
      { model: models.data[0].id, endpoint: "/v1/completions", ignoreEos: true },
    );
    const u = new URL(sim.url);
    const parts: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      const s = connect({ host: u.hostname, port: Number(u.port) }, () =>
        s.write(
          `POST /v1/completions HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        ),
      );
      let tail = "";
      s.on("data", (d: Buffer) => {
        parts.push(d);
        // The chunked body's last chunk ends the response.
        tail = (tail + d.toString("latin1")).slice(-5);
        if (tail === "0\r\n\r\n") {
          s.destroy();
          resolve();
        }
      });
      s.on("close", () => reject(new Error("the sim closed the connection before the response ended")));
      s.on("error", reject);
    });
    return Buffer.concat(parts);
  } finally {
    await sim.stop();
  }
}

/** The response cut into reads: its head (sent as keep-alive), then one chunked frame each. */
function frames(raw: Buffer): Buffer[] {
  const headEnd = raw.indexOf("\r\n\r\n") + 4;
  const out = [raw.subarray(0, headEnd)];
  for (let p = headEnd; p < raw.length; ) {
    const nl = raw.indexOf("\r\n", p);
    const size = Number.parseInt(raw.toString("latin1", p, nl), 16);
    if (!(size >= 0)) throw new Error(`not a chunked body at byte ${p}`);
    const end = nl + 2 + size + 2;
    out.push(raw.subarray(p, end));
    p = end;
  }
  return out;
}

const reads = frames(await record());
// Connections to a server that answers nothing: the responses are handed to the read callbacks here.
const server = createServer((s) => s.on("data", () => {}));
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const client = new StreamClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { transport: "h1" });
await client.preconnect(STREAMS);
client.prepare(STREAMS, OUT_LEN + 4);

/** One run: every stream sent, then each read handed to every stream in turn. Returns µs of CPU per read. */
async function rep(): Promise<number> {
  let done = 0;
  for (let i = 0; i < STREAMS; i++) {
    const rec = blankRecord();
    rec.targetOutputLen = OUT_LEN;
    client.streamTo("/v1/completions", "{}", rec, performance.now(), (r) => {
      if (r.errorClass !== null || r.outputTokens !== OUT_LEN)
        throw new Error(`a replayed stream ended with ${r.errorClass}: ${r.errorMessage}`);
      done++;
    });
  }
  // The h1 pool's sockets and net's read callback on each (the symbols net keeps them under).
  const socks: Socket[] = [...((client as any).h1.all as Set<any>)].filter((c) => c.req).map((c) => c.socket);
  const syms = Object.getOwnPropertySymbols(socks[0]);
  const kCb = syms.find((s) => s.description === "kBufferCb");
  const kBuf = syms.find((s) => s.description === "kBuffer");
  if (socks.length !== STREAMS || !kCb || !kBuf) throw new Error("cannot reach the h1 sockets' read callbacks");
  const cbs = socks.map((s) => (s as any)[kCb] as (n: number, b: Buffer) => boolean);
  const buf = (socks[0] as any)[kBuf] as Buffer;
  let us = 0;
  for (const f of reads) {
    const c0 = process.cpuUsage();
    for (let k = 0; k < STREAMS; k++) {
      f.copy(buf, 0);
      cbs[k]!(f.length, buf);
    }
    const c = process.cpuUsage(c0);
    us += c.user + c.system;
    if (EVICT) for (let i = 0; i < junk.length; i += 16) junk[i]!++;
  }
  if (done !== STREAMS) throw new Error(`${done} of ${STREAMS} replayed streams ended`);
  return us / (STREAMS * reads.length);
}

try {
  await rep(); // warm-up
  const per: number[] = [];
  for (let i = 0; i < REPS; i++) per.push(await rep());
  per.sort((a, b) => a - b);
  console.log(
    `client replay, measuring ${codeMeasured()}; Node ${process.version}; ${STREAMS} streams × ${reads.length} reads (one recorded sim stream, continuous usage)${EVICT ? ", caches flushed between steps" : ""}: CPU per read median ${per[per.length >> 1]!.toFixed(3)} µs, lowest ${per[0]!.toFixed(3)} µs (${REPS} runs)`,
  );
} finally {
  await client.close();
  server.close();
}
