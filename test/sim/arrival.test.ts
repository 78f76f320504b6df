// The sim's server-side TTFT against what a client measures from its request write to first token.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { prefillBatch, resolveSim } from "../../src/sim/index.ts";
import { tokenize } from "../../src/sim/text.ts";
import { type SpawnedSim, spawnSim } from "../helpers/sim.ts";
import { cannotRun } from "../helpers/skip.ts";
import { get, sample } from "./util.ts";

const PROFILE = "llama3-8b-1xh100";
const WARM = 3;

/** One keep-alive connection, one request at a time, the whole request in one write. */
class RawClient {
  private constructor(private readonly s: Socket) {}
  static async open(port: number): Promise<RawClient> {
    const s = connect({ port, host: "127.0.0.1", noDelay: true });
    await new Promise<void>((resolve, reject) => {
      s.once("connect", resolve);
      s.once("error", reject);
    });
    return new RawClient(s);
  }
  /** Resolves with ms from the write to the first read holding `first`, once `last` has arrived. */
  exchange(req: string, first: string, last: string): Promise<number> {
    return new Promise((resolve, reject) => {
      let buf = "";
      let tFirst = -1;
      const onData = (d: Buffer): void => {
        const now = performance.now();
        buf += d.toString("latin1");
        if (tFirst < 0 && buf.includes(first)) tFirst = now - t0;
        if (buf.includes(last)) {
          this.s.off("data", onData);
          this.s.off("error", reject);
          resolve(tFirst);
        }
      };
      this.s.on("data", onData);
      this.s.once("error", reject);
      const t0 = performance.now();
      this.s.write(req);
    });
  }
  /**
   * GET /ping round trip carrying `bodyBytes` of body (answered on its headers, body discarded): the
   * loopback, both ways, for a request of that size, plus a trivial request's handling.
   */
  ping(bodyBytes: number): Promise<number> {
    const head = `GET /ping HTTP/1.1\r\nhost: x\r\ncontent-length: ${bodyBytes}\r\n\r\n`;
    return this.exchange(head + "x".repeat(bodyBytes), "HTTP/1.1 200", "\r\n\r\n");
  }
  /** Client TTFT of a streaming completion: write to the read that carries the first token. */
  ttft(body: string): Promise<number> {
    const req = `POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    return this.exchange(req, 'data: {"id"', "data: [DONE]");
  }
  /** Client time − the holder's own (first read → write): the loopback and the wakes, both ways. */
  async held(holdMs: number, bodyBytes: number): Promise<number> {
    let text = "";
    const onData = (d: Buffer) => {
      text += d.toString("latin1");
    };
    this.s.on("data", onData);
    const total = await this.exchange(`${holdMs} ${bodyBytes}\n${"x".repeat(bodyBytes)}`, "held ", "\n");
    this.s.off("data", onData);
    return total - Number(text.slice(text.indexOf("held ") + 5, text.indexOf("\n")));
  }
  close(): void {
    this.s.destroy();
  }
}

/**
 * A second process that holds each request as the sim holds a prefill, then answers: the same shape
 * (arrival stamped on the first read, a timer, one write back, the client woken by it), none of the
 * sim's code. Request: "<holdMs> <bodyBytes>\n" + body; reply: "held <ms from first read to the write>\n".
 */
const HOLDER = `
const net = require("node:net");
const srv = net.createServer({ noDelay: true }, (s) => {
  let need = -1, got = 0, t0 = 0, hold = 0, head = "";
  s.on("data", (d) => {
    if (need < 0) {
      if (head === "") t0 = performance.now();
      head += d.toString("latin1");
      const nl = head.indexOf("\\n");
      if (nl < 0) return;
      [hold, need] = head.slice(0, nl).split(" ").map(Number);
      got = head.length - nl - 1;
      head = "";
    } else got += d.length;
    if (got < need) return;
    need = -1;
    const from = t0;
    setTimeout(() => s.write("held " + (performance.now() - from) + "\\n"), hold);
  });
});
srv.listen(0, "127.0.0.1", () => process.stdout.write(srv.address().port + "\\n"));
`;

async function startHolder(): Promise<{ port: number; stop: () => void }> {
  const child = spawn(process.execPath, ["-e", HOLDER], { stdio: ["ignore", "pipe", "inherit"] });
  child.stdout.setEncoding("utf8");
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d: string) => {
      out += d;
      if (out.includes("\n")) resolve(Number(out.trim()));
    });
    child.once("exit", (code) => reject(new Error(`holder exited (code ${code}) before listening`)));
  });
  return { port, stop: () => child.kill() };
}

const median = (a: number[]): number => {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function serverTtft(url: string): Promise<{ sumS: number; count: number; scale: number }> {
  const m = (await get(url, "/metrics")).body;
  return {
    sumS: sample(m, "vllm:time_to_first_token_seconds_sum"),
    count: sample(m, "vllm:time_to_first_token_seconds_count"),
    scale: sample(m, "inferscope_sim_time_scale"),
  };
}

/**
 * Per request: the client's TTFT, the server's (its histogram's delta, simulated s → wall ms), a /ping
 * round trip just before on the same connection, and the held reference: the same body, held by the
 * second process for the time the model gives the sim's prefill.
 */
let probeNo = 0;

async function measure(
  url: string,
  port: number,
  holderPort: number,
  promptWords: number,
  requests: number,
  holdMs: (tokens: number) => number,
) {
  const c = await RawClient.open(port);
  const h = await RawClient.open(holderPort);
  const rows: Array<{ client: number; server: number; ping: number; held: number; promptTokens: number }> = [];
  try {
    for (let i = 0; i < WARM + requests; i++) {
      // Unique across passes: a repeated prompt would hit the prefix cache and skip its prefill.
      const prompt = `arrival probe ${probeNo++}${" word".repeat(promptWords)}`;
      const body = JSON.stringify({ prompt, max_tokens: 2, ignore_eos: true, stream: true });
      const promptTokens = tokenize(prompt).length;
      const held = await h.held(Math.round(holdMs(promptTokens)), Buffer.byteLength(body));
      const before = await serverTtft(url);
      const ping = await c.ping(Buffer.byteLength(body));
      const client = await c.ttft(body);
      const after = await serverTtft(url);
      assert.equal(after.count - before.count, 1);
      const server = ((after.sumS - before.sumS) * 1000) / after.scale;
      if (i >= WARM) rows.push({ client, server, ping, held, promptTokens });
    }
  } finally {
    c.close();
    h.close();
  }
  return rows;
}

describe(`server-side TTFT vs the client's (real sim process, time-scale 1, ${PROFILE})`, () => {
  let sim: SpawnedSim;
  let holder: { port: number; stop: () => void };
  before(async () => {
    sim = await spawnSim(["--time-scale", "1", "--profile", PROFILE, "--seed", "7"]);
    holder = await startHolder();
  });
  const { profile, model } = resolveSim({ profile: PROFILE });
  const holdMs = (tokens: number) => profile.cost.frontendMs + model.stepMs(prefillBatch(tokens));
  after(() => {
    holder?.stop();
    return sim?.stop();
  });

  // The sim's own handling (read, parse, validate, tokenize) took 0.2 ms for a short prompt and
  // 0.6 ms for 4,000 words (20 KB of JSON) when it sat before the arrival stamp: medians of gap − /ping
  // were 0.17-0.29 and 0.60-0.69 ms then, -0.03-0.06 and 0.02-0.16 ms after (2-core VM). Against the
  // held probe they read -0.05 to -0.2 and -0.2 to -0.7 ms (a fresh 2-core VM, 2026-12-08).
  for (const [words, bound, requests] of [
    [0, 0.2, 24],
    [4000, 0.35, 16],
  ] as const)
    test(`${words}-word prompt: client TTFT − server TTFT is what a process holding as long shows, within ${bound} ms`, async (t) => {
      // A starved host (another process on the cores) is measured again, twice at most, before giving up.
      let rows = await measure(sim.url, sim.port, holder.port, words, requests, holdMs);
      for (let again = 0; again < 2 && median(rows.map((r) => r.ping)) > 2; again++)
        rows = await measure(sim.url, sim.port, holder.port, words, requests, holdMs);
      // Arrival is stamped after the client's write and the first token read after the server's stamp.
      for (const r of rows) assert.ok(r.client >= r.server - 0.01, `client ${r.client} < server ${r.server}`);
      const gap = median(rows.map((r) => r.client - r.server));
      const ping = median(rows.map((r) => r.ping));
      const held = median(rows.map((r) => r.held));
      const extra = median(rows.map((r) => r.client - r.server - r.held));
      t.diagnostic(
        `median: client TTFT ${median(rows.map((r) => r.client)).toFixed(3)} server ${median(rows.map((r) => r.server)).toFixed(3)} ` +
          `gap ${gap.toFixed(3)} /ping RTT ${ping.toFixed(3)} held ${held.toFixed(3)} gap − held ${extra.toFixed(3)} ms`,
      );
      // The sim's handling overlaps the modelled frontend cost: the server's mean TTFT is the model's
      // (steps carry unit-mean jitter; timers only fire late, so the upper check takes the median).
      const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
      const truth = mean(rows.map((r) => profile.cost.frontendMs + model.stepMs(prefillBatch(r.promptTokens))));
      const server = mean(rows.map((r) => r.server));
      assert.ok(server >= truth * 0.99, `server TTFT ${server} vs the model's ${truth}`);
      // Sub-millisecond comparisons need a host that is not starved; the round trip itself says so
      // (about 0.5 ms on an idle 2-core VM, most of it waking the two processes).
      if (ping > 2) {
        // Not a pass: the sub-millisecond checks did not run (a failure in CI).
        cannotRun(
          t,
          `host starved (/ping RTT ${ping.toFixed(2)} ms in 3 tries): the sub-millisecond checks cannot run`,
        );
        return;
      }
      // Timers fire late on a loaded host; the allowance grows with the spread of the server's own
      // TTFT over these requests (p25–p75), which that lateness widens.
      const serverMedian = median(rows.map((r) => r.server));
      const ttfts = rows.map((r) => r.server).sort((a, b) => a - b);
      const ttftSpread = ttfts[Math.floor(ttfts.length * 0.75)]! - ttfts[Math.floor(ttfts.length * 0.25)]!;
      assert.ok(
        serverMedian < truth + 1 + 2 * ttftSpread,
        `server TTFT median ${serverMedian} vs the model's ${truth} (spread ${ttftSpread.toFixed(3)}; 1 ms + 2 × spread)`,
      );
      // The reference is the held probe, not /ping: after a prefill's hold both processes have slept, and
      // waking them then cost more than a back-to-back round trip — by 0.1–1.1 ms here (idle and beside busy
      // loops), and gap − /ping read 1.2–1.8 ms on one slow VM where the 0-word case, held 9 ms, read 0.1.
      // The allowance grows with the noise this run measured itself: the spread (p25–p75) of the held
      // probes taken beside each request.
      const helds = rows.map((r) => r.held).sort((a, b) => a - b);
      const spread = helds[Math.floor(helds.length * 0.75)]! - helds[Math.floor(helds.length * 0.25)]!;
      assert.ok(
        extra < bound + 2 * spread,
        `gap − held reference ${extra.toFixed(3)} ms (gap ${gap.toFixed(3)}, held ${held.toFixed(3)}, /ping ${ping.toFixed(3)}, spread ${spread.toFixed(3)}; bound ${bound} + 2 × spread)`,
      );
    });
});
