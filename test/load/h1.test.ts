// H1Pool against a real node:net server on 127.0.0.1 that writes hand-made raw HTTP responses, so every
// framing case (and every way a response can be split across reads) is exact.
import assert from "node:assert/strict";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { describe, test } from "node:test";
import { Worker } from "node:worker_threads";
import fc from "fast-check";
import { blankRecord, StreamClient } from "../../src/load/client.ts";
import { type H1Error, type H1Headers, H1Pool } from "../../src/load/h1.ts";
import { type SseMessage, SseParser } from "../../src/load/sse.ts";
import type { RequestRecord } from "../../src/load/types.ts";
import { spawnSim } from "../helpers/sim.ts";

// ---------------------------------------------------------------------------------------------------
// A raw HTTP server: parses requests (head + Content-Length body), hands each to the test's responder.

interface RawReq {
  /** 1-based connection number at the server. */
  conn: number;
  /** 1-based request number on that connection. */
  n: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
  sock: net.Socket;
}

interface RawServer {
  url: string;
  port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Most connections open at the same time. */
  readonly maxOpen: number;
  readonly open: number;
  requests: RawReq[];
  /** Resolves when the server-side socket of connection `conn` has closed. */
  closed(conn: number): Promise<void>;
  close(): Promise<void>;
}

async function rawServer(respond: (req: RawReq) => void): Promise<RawServer> {
  let connections = 0;
  let open = 0;
  let maxOpen = 0;
  const requests: RawReq[] = [];
  const sockets = new Set<net.Socket>();
  const closedP = new Map<number, Promise<void>>();
  const server = net.createServer((sock) => {
    const conn = ++connections;
    open++;
    maxOpen = Math.max(maxOpen, open);
    sockets.add(sock);
    sock.setNoDelay(true);
    closedP.set(conn, new Promise((r) => sock.once("close", () => r())));
    sock.on("error", () => {});
    sock.on("close", () => {
      open--;
      sockets.delete(sock);
    });
    let buf = Buffer.alloc(0);
    let n = 0;
    sock.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const he = buf.indexOf("\r\n\r\n");
        if (he < 0) return;
        const lines = buf.toString("latin1", 0, he).split("\r\n");
        const [method = "", path = ""] = lines[0]!.split(" ");
        const headers: Record<string, string> = {};
        for (const l of lines.slice(1)) {
          const c = l.indexOf(":");
          headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
        }
        const cl = Number(headers["content-length"] ?? 0);
        if (buf.length < he + 4 + cl) return;
        const body = buf.toString("utf8", he + 4, he + 4 + cl);
        buf = buf.subarray(he + 4 + cl);
        const req: RawReq = { conn, n: ++n, method, path, headers, body, sock };
        requests.push(req);
        respond(req);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get connections() {
      return connections;
    },
    get maxOpen() {
      return maxOpen;
    },
    get open() {
      return open;
    },
    requests,
    closed: (c) => closedP.get(c) ?? Promise.reject(new Error(`no connection ${c}`)),
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

const immediate = () => new Promise<void>((r) => setImmediate(r));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** Lets anything already due (a late second callback, a close) happen before counting calls. */
const quiet = async () => {
  await immediate();
  await sleep(3);
  await immediate();
};

/** Writes `data` cut at `cuts`, one piece per event-loop turn (so each piece is its own socket read). */
async function writePieces(sock: net.Socket, data: Buffer, cuts: number[]): Promise<void> {
  const at = [...new Set(cuts.filter((c) => c > 0 && c < data.length))].sort((a, b) => a - b);
  let prev = 0;
  // Start in the check phase, so a poll phase (the client's read) runs between any two writes.
  await immediate();
  for (const c of [...at, data.length]) {
    if (sock.destroyed) return;
    sock.write(data.subarray(prev, c));
    prev = c;
    await immediate();
  }
}

const everyByte = (len: number) => Array.from({ length: len }, (_, i) => i);

// ---------------------------------------------------------------------------------------------------
// The client side: a handler that copies its ranges (they are only valid during the call) and counts.

interface Outcome {
  status: number;
  statusText: string;
  headers: H1Headers | null;
  heads: number;
  body: Buffer;
  /** Read sequence numbers of the onBody calls. */
  reads: number[];
  bufs: Set<Buffer>;
  ends: number;
  fails: number;
  error: H1Error | null;
  /** Contract violations seen inside callbacks (asserting there would throw into the socket's read). */
  violations: string[];
}

function send(
  pool: H1Pool,
  path = "/",
  body = "",
  hooks: { onEnd?: (o: Outcome) => void; onBody?: (o: Outcome) => void } = {},
): { done: Promise<Outcome>; abort: (reason: string) => void; o: Outcome } {
  const o: Outcome = {
    status: 0,
    statusText: "",
    headers: null,
    heads: 0,
    body: Buffer.alloc(0),
    reads: [],
    bufs: new Set(),
    ends: 0,
    fails: 0,
    error: null,
    violations: [],
  };
  const pieces: Buffer[] = [];
  let resolve!: (o: Outcome) => void;
  const done = new Promise<Outcome>((r) => {
    resolve = r;
  });
  const h = pool.request("POST", path, { "content-type": "application/json" }, body, {
    onHead(status, statusText, headers) {
      o.heads++;
      o.status = status;
      o.statusText = statusText;
      o.headers = headers;
    },
    onBody(buf, s, e, tPerf, read) {
      if (o.heads !== 1) o.violations.push("onBody before onHead");
      if (!(s >= 0 && s <= e && e <= buf.length)) o.violations.push(`bad range [${s}, ${e}) of ${buf.length}`);
      if (!(tPerf > 0 && tPerf <= performance.now())) o.violations.push(`bad tPerf ${tPerf}`);
      if (o.ends + o.fails > 0) o.violations.push("onBody after settling");
      pieces.push(Buffer.from(buf.subarray(s, e)));
      o.reads.push(read);
      o.bufs.add(buf);
      hooks.onBody?.(o);
    },
    onEnd() {
      o.ends++;
      o.body = Buffer.concat(pieces);
      resolve(o);
      hooks.onEnd?.(o);
    },
    onFail(err) {
      o.fails++;
      o.error = err;
      o.body = Buffer.concat(pieces);
      resolve(o);
    },
  });
  return { done, abort: h.abort, o };
}

/** Settled exactly once, after letting any late callback happen. */
async function once(o: Outcome): Promise<void> {
  await quiet();
  assert.equal(o.ends + o.fails, 1, `settled ${o.ends} ends + ${o.fails} fails`);
  assert.deepEqual(o.violations, []);
}

async function ok(p: { done: Promise<Outcome> }): Promise<Outcome> {
  const o = await p.done;
  assert.equal(o.error, null, `unexpected failure: ${o.error?.code} ${o.error?.message}`);
  await once(o);
  return o;
}

async function failed(p: { done: Promise<Outcome> }, codes: string[]): Promise<Outcome> {
  const o = await p.done;
  assert.ok(o.error, "expected a failure, got onEnd");
  assert.ok(codes.includes(o.error.code), `code ${o.error.code} (${o.error.message}) not one of ${codes}`);
  await once(o);
  return o;
}

/** Runs `fn` with a fresh server and pool, closing both whatever happens. */
async function withServer(
  respond: (req: RawReq) => void,
  fn: (srv: RawServer, pool: H1Pool) => Promise<void>,
  opts: ConstructorParameters<typeof H1Pool>[1] = {},
): Promise<void> {
  const srv = await rawServer(respond);
  const pool = new H1Pool(srv.url, opts);
  try {
    await fn(srv, pool);
  } finally {
    pool.close();
    await srv.close();
  }
}

const OK_HEAD = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";
/** A whole 200 response with a Content-Length body. */
const resp = (s: string) => `HTTP/1.1 200 OK\r\nContent-Length: ${s.length}\r\n\r\n${s}`;

// ---------------------------------------------------------------------------------------------------

describe("chunked bodies, split at every possible place", () => {
  const body1 = 'data: {"choices":[{"text":"héllo 🙂"}]}\r\n\r\n0\r\n\r\ndata: [DONE]\r\n\r\n';
  const b1 = Buffer.from(body1);
  const variants: { name: string; raw: string; body: string }[] = [
    {
      name: "CRLF, lower-case hex (1a), body bytes that look like framing",
      raw:
        `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n` +
        `${(20).toString(16)}\r\n${b1.subarray(0, 20).toString("latin1")}\r\n` +
        `${(b1.length - 20).toString(16)}\r\n${b1.subarray(20).toString("latin1")}\r\n` +
        "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
      body: `${body1}abcdefghijklmnopqrstuvwxyz`,
    },
    {
      name: "upper-case hex, chunk extensions, trailers after the 0 chunk",
      raw:
        `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n` +
        "5;ext=1\r\nhello\r\n" +
        '1A ; name="v;x"\r\nABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n' +
        "00C\r\n hello world\r\n" +
        "0;last=yes\r\nX-Trailer: a\r\nX-Other: b: c\r\n\r\n",
      body: "helloABCDEFGHIJKLMNOPQRSTUVWXYZ hello world",
    },
    {
      name: "LF-only line endings throughout (head, sizes, data ends, trailer)",
      raw:
        "HTTP/1.1 200 OK\nContent-Type: text/event-stream\nTransfer-Encoding: chunked\n\n" +
        "5\nhello\n" +
        "7;e\n, world\n" +
        "0\nX-T: 1\n\n",
      body: "hello, world",
    },
    {
      name: "Transfer-Encoding list ending in chunked, many one-byte chunks",
      raw:
        `${OK_HEAD}Transfer-Encoding: gzip, chunked\r\n\r\n` +
        [..."one-byte"].map((c) => `1\r\n${c}\r\n`).join("") +
        "0\r\n\r\n",
      body: "one-byte",
    },
  ];

  for (const v of variants) {
    test(v.name, async () => {
      const raw = Buffer.from(v.raw, "latin1");
      const want = Buffer.from(v.body);
      let cuts: number[] = [];
      await withServer(
        (req) => void writePieces(req.sock, raw, cuts),
        async (srv, pool) => {
          const check = async () => {
            const o = await ok(send(pool));
            assert.equal(o.status, 200);
            assert.equal(o.headers!.chunked, true);
            assert.equal(o.body.toString("latin1"), want.toString("latin1"));
            return o;
          };
          cuts = [];
          await check();
          cuts = everyByte(raw.length);
          const o = await check();
          // The split really happened: the body arrived over many separate reads.
          assert.ok(new Set(o.reads).size > want.length / 4, `only ${new Set(o.reads).size} reads`);
          await fc.assert(
            fc.asyncProperty(
              fc.uniqueArray(fc.integer({ min: 1, max: raw.length - 1 }), { maxLength: 24 }),
              async (c) => {
                cuts = c;
                await check();
              },
            ),
            { numRuns: 25 },
          );
          // Every response ended cleanly, so one keep-alive connection carried them all.
          assert.equal(srv.connections, 1);
          assert.equal(srv.requests.length, 27);
        },
      );
    });
  }
});

describe("Content-Length, close-delimited, Connection: close, HTTP/1.0", () => {
  test("Content-Length: 0 ends at once and the connection is reused", async () => {
    await withServer(
      (req) => req.sock.write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
      async (srv, pool) => {
        for (let i = 0; i < 3; i++) {
          const o = await ok(send(pool));
          assert.equal(o.headers!.contentLength, 0);
          assert.equal(o.body.length, 0);
        }
        assert.equal(srv.connections, 1);
      },
    );
  });

  test("a 404 JSON error body, byte by byte, then the same connection serves the next request", async () => {
    const json = '{"error":{"message":"The model `nope` does not exist.","type":"NotFoundError","code":404}}';
    const raw = Buffer.from(
      `HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
    );
    await withServer(
      (req) => void writePieces(req.sock, raw, req.n === 1 ? everyByte(raw.length) : []),
      async (srv, pool) => {
        for (let i = 0; i < 2; i++) {
          const o = await ok(send(pool));
          assert.equal(o.status, 404);
          assert.equal(o.statusText, "Not Found");
          assert.equal(o.headers!.contentType, "application/json");
          assert.equal(o.headers!.contentLength, Buffer.byteLength(json));
          assert.equal(o.headers!.chunked, false);
          assert.equal(o.body.toString(), json);
        }
        assert.equal(srv.connections, 1);
      },
    );
  });

  test("header fields: names lower-cased, repeated ones joined, status text with spaces", async () => {
    await withServer(
      (req) =>
        req.sock.write(
          "HTTP/1.1 200 All Good Here\r\nX-A: 1\r\nx-a: 2\r\nX-Empty:\r\nX-Spaced :  v  \r\nContent-Length: 2\r\n\r\nok",
        ),
      async (_srv, pool) => {
        const o = await ok(send(pool));
        assert.equal(o.statusText, "All Good Here");
        assert.equal(o.headers!.fields["x-a"], "1, 2");
        assert.equal(o.headers!.fields["x-empty"], "");
        assert.equal(o.headers!.fields["x-spaced"], "v");
        assert.equal(o.headers!.contentType, "");
        assert.equal(o.body.toString(), "ok");
      },
    );
  });

  test("a status line with no reason phrase", async () => {
    await withServer(
      (req) =>
        req.sock.write(
          req.n === 1 ? "HTTP/1.1 200\r\nContent-Length: 1\r\n\r\na" : "HTTP/1.1 201 \r\nContent-Length: 1\r\n\r\nb",
        ),
      async (_srv, pool) => {
        const a = await ok(send(pool));
        assert.deepEqual([a.status, a.statusText, a.body.toString()], [200, "", "a"]);
        const b = await ok(send(pool));
        assert.deepEqual([b.status, b.statusText, b.body.toString()], [201, "", "b"]);
      },
    );
  });

  test("a close-delimited body (no length, not chunked) ends at close, in pieces; the next request opens a new connection", async () => {
    const data = "data: a\n\ndata: b\n\ndata: [DONE]\n\n";
    await withServer(
      (req) =>
        void (async () => {
          await writePieces(req.sock, Buffer.from(`${OK_HEAD}\r\n${data}`), [5, 30, 60, 61, 70, 80]);
          req.sock.end();
        })(),
      async (srv, pool) => {
        for (let i = 0; i < 2; i++) {
          const o = await ok(send(pool));
          assert.equal(o.headers!.contentLength, -1);
          assert.equal(o.headers!.chunked, false);
          assert.equal(o.body.toString(), data);
        }
        assert.equal(srv.connections, 2);
        assert.equal(srv.requests.length, 2, "no retry of a close-delimited response");
      },
    );
  });

  test("Connection: close → the connection is not reused", async () => {
    await withServer(
      (req) => req.sock.write("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc"),
      async (srv, pool) => {
        const a = await ok(send(pool));
        assert.equal(a.headers!.keepAlive, false);
        assert.equal(a.body.toString(), "abc");
        const b = await ok(send(pool));
        assert.equal(b.body.toString(), "abc");
        assert.equal(srv.connections, 2);
        // The client closed the first one itself, without waiting for the server.
        await srv.closed(1);
      },
    );
  });

  test("HTTP/1.0: not reused by default, reused with Connection: keep-alive, close-delimited body", async () => {
    const answers = [
      "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nv0",
      "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nk1",
      "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nk2",
    ];
    let i = 0;
    await withServer(
      (req) => {
        const a = answers[i++];
        if (a) req.sock.write(a);
        else req.sock.end("HTTP/1.0 200 OK\r\n\r\nuntil close");
      },
      async (srv, pool) => {
        const a = await ok(send(pool));
        assert.equal(a.headers!.keepAlive, false);
        assert.equal(a.body.toString(), "v0");
        const b = await ok(send(pool));
        assert.equal(b.headers!.keepAlive, true);
        assert.equal(srv.connections, 2);
        assert.equal((await ok(send(pool))).body.toString(), "k2");
        assert.equal(srv.connections, 2, "the keep-alive one was reused");
        assert.equal((await ok(send(pool))).body.toString(), "until close");
        assert.equal(srv.connections, 3);
      },
    );
  });

  test("keep-alive expiry: Keep-Alive timeout=1 (minus 1 s = 0) and keepAliveMs 0 are never reused; timeout=5 is", async () => {
    for (const [hint, opts, conns] of [
      ["Keep-Alive: timeout=1\r\n", {}, 3],
      ["", { keepAliveMs: 0 }, 3],
      ["Keep-Alive: timeout=5, max=100\r\n", {}, 1],
    ] as const) {
      await withServer(
        (req) => req.sock.write(`HTTP/1.1 200 OK\r\n${hint}Content-Length: 1\r\n\r\nx`),
        async (srv, pool) => {
          for (let i = 0; i < 3; i++) await ok(send(pool));
          assert.equal(srv.connections, conns, `${JSON.stringify(hint)} ${JSON.stringify(opts)}`);
        },
        opts,
      );
    }
  });

  test("a server's Keep-Alive hint only lowers keepAliveMs (keepAliveMs 0 + timeout=5 → never reused)", {}, async () => {
    await withServer(
      (req) => req.sock.write("HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5\r\nContent-Length: 1\r\n\r\nx"),
      async (srv, pool) => {
        for (let i = 0; i < 3; i++) await ok(send(pool));
        assert.equal(srv.connections, 3);
      },
      { keepAliveMs: 0 },
    );
  });

  test("a 204 with no Content-Length has no body: it ends at its head", {}, async () => {
    await withServer(
      (req) => req.sock.write("HTTP/1.1 204 No Content\r\n\r\n"),
      async (_srv, pool) => {
        const p = send(pool);
        const o = await Promise.race([p.done, sleep(150).then(() => null)]);
        assert.ok(o, "no onEnd within 150 ms (the connection stays open)");
        assert.equal(o.status, 204);
      },
    );
  });
});

describe("informational heads", () => {
  const raw = Buffer.from(
    "HTTP/1.1 100 Continue\r\n\r\n" +
      "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" +
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Real: yes\r\n\r\nfinal",
  );
  for (const [name, cuts] of [
    ["all at once", []],
    ["byte by byte", everyByte(raw.length)],
  ] as const)
    test(`100 Continue and 103 before the real head (${name})`, async () => {
      await withServer(
        (req) => void writePieces(req.sock, raw, [...cuts]),
        async (srv, pool) => {
          for (let i = 0; i < 2; i++) {
            const o = await ok(send(pool));
            assert.equal(o.heads, 1);
            assert.equal(o.status, 200);
            assert.equal(o.headers!.fields["x-real"], "yes");
            assert.equal(o.headers!.fields.link, undefined);
            assert.equal(o.body.toString(), "final");
          }
          assert.equal(srv.connections, 1);
        },
      );
    });
});

describe("keep-alive reuse and the one retry", () => {
  test("two sequential requests use one connection; the request reaches the server intact", async () => {
    await withServer(
      (req) => req.sock.write(resp(`${req.conn}/${req.n}`)),
      async (srv, pool) => {
        assert.equal((await ok(send(pool, "/v1/a?x=1", '{"q":"é"}'))).body.toString(), "1/1");
        assert.equal((await ok(send(pool, "/b"))).body.toString(), "1/2");
        assert.equal(srv.connections, 1);
        assert.equal(pool.size, 1);
        const r = srv.requests[0]!;
        assert.equal(r.method, "POST");
        assert.equal(r.path, "/v1/a?x=1");
        assert.equal(r.body, '{"q":"é"}');
        assert.equal(r.headers.host, `127.0.0.1:${srv.port}`);
        assert.equal(r.headers["content-length"], String(Buffer.byteLength('{"q":"é"}')));
        assert.equal(r.headers["content-type"], "application/json");
      },
    );
  });

  test("the server closes a reused connection on the next request → one retry on a new connection succeeds", async () => {
    await withServer(
      (req) => {
        if (req.conn === 1 && req.n === 2) req.sock.destroy();
        else req.sock.write(resp(`${req.conn}/${req.n}`));
      },
      async (srv, pool) => {
        assert.equal((await ok(send(pool))).body.toString(), "1/1");
        assert.equal((await ok(send(pool, "/second"))).body.toString(), "2/1");
        assert.equal(srv.connections, 2);
        assert.deepEqual(
          srv.requests.map((r) => `${r.conn}/${r.n} ${r.path}`),
          ["1/1 /", "1/2 /second", "2/1 /second"],
        );
      },
    );
  });

  test("the server closes right after the first response; a request sent at once (from onEnd) still succeeds", async () => {
    await withServer(
      (req) => {
        if (req.conn === 1) req.sock.end(resp("first"));
        else req.sock.write(resp(`${req.conn}/${req.n}`));
      },
      async (srv, pool) => {
        let second: ReturnType<typeof send> | null = null;
        const a = await ok(send(pool, "/", "", { onEnd: () => (second = send(pool, "/second")) }));
        assert.equal(a.body.toString(), "first");
        assert.equal((await ok(second!)).body.toString(), "2/1");
        assert.equal(srv.connections, 2);
        assert.equal(srv.requests.filter((r) => r.conn === 2).length, 1);
      },
    );
  });

  test("only one retry: the retried request's connection closing too fails it (H1_CLOSED)", async () => {
    await withServer(
      (req) => {
        if (req.conn === 1 && req.n === 1) req.sock.write(resp("ok"));
        else req.sock.destroy();
      },
      async (srv, pool) => {
        await ok(send(pool));
        await failed(send(pool, "/second"), ["H1_CLOSED", "ECONNRESET"]);
        assert.equal(srv.requests.filter((r) => r.path === "/second").length, 2);
        assert.equal(srv.connections, 2);
      },
    );
  });

  test("a new connection closed before any response byte is not retried", async () => {
    await withServer(
      (req) => req.sock.destroy(),
      async (srv, pool) => {
        const o = await failed(send(pool), ["H1_CLOSED", "ECONNRESET"]);
        assert.equal(o.heads, 0);
        assert.equal(srv.requests.length, 1);
      },
    );
  });

  for (const [name, raw] of [
    ["Content-Length", `HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial`],
    ["chunked", `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n20\r\nabc`],
    ["head", "HTTP/1.1 200 OK\r\nContent-Len"],
  ] as const)
    test(`a connection closed mid-response (${name}) → H1_CLOSED once, no retry, no hang`, async () => {
      for (const reused of [false, true]) {
        await withServer(
          (req) => {
            if (reused && req.n === 1) {
              req.sock.write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
              return;
            }
            req.sock.write(raw);
            setImmediate(() => req.sock.end());
          },
          async (srv, pool) => {
            if (reused) await ok(send(pool));
            const o = await failed(send(pool), ["H1_CLOSED", "ECONNRESET"]);
            if (name !== "head") {
              assert.equal(o.heads, 1);
              assert.equal(o.body.toString(), name === "chunked" ? "partialabc" : "partial");
            } else assert.equal(o.heads, 0);
            assert.equal(srv.requests.length, reused ? 2 : 1, "not retried");
            assert.equal(srv.connections, 1);
          },
        );
      }
    });
});

describe("protocol errors", () => {
  const cases: { name: string; raw: string; msg: RegExp }[] = [
    { name: "garbage status line", raw: "FOO BAR BAZ\r\n\r\n", msg: /not an HTTP\/1\.x response: "FOO BAR BAZ"/ },
    { name: "HTTP/2 status line", raw: "HTTP/2 200 OK\r\n\r\n", msg: /not an HTTP\/1\.x response/ },
    { name: "status not 3 digits", raw: "HTTP/1.1 20 OK\r\n\r\n", msg: /not an HTTP\/1\.x response/ },
    {
      name: "bad chunk size",
      raw: `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n`,
      msg: /bad byte 0x7a in a chunk size line/,
    },
    {
      name: "empty chunk size line",
      raw: `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n`,
      msg: /chunk size/,
    },
    {
      name: "chunk size too large",
      raw: `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n1000000000000\r\n`,
      msg: /chunk size too large/,
    },
    {
      name: "chunk data not followed by CRLF",
      raw: `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n3\r\nhelloworld\r\n0\r\n\r\n`,
      msg: /chunk data not followed by CRLF/,
    },
    {
      name: "bad Content-Length",
      raw: "HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n",
      msg: /bad Content-Length "12abc"/,
    },
    {
      name: "header line without a colon",
      raw: "HTTP/1.1 200 OK\r\nNoColonHere\r\n\r\n",
      msg: /bad header line "NoColonHere"/,
    },
  ];
  for (const c of cases)
    test(`${c.name} → H1_PROTOCOL with a clear message; the connection is dropped`, async () => {
      await withServer(
        (req) => req.sock.write(req.conn === 1 ? c.raw : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        async (srv, pool) => {
          const o = await failed(send(pool), ["H1_PROTOCOL"]);
          assert.match(o.error!.message, /^malformed HTTP response: /);
          assert.match(o.error!.message, c.msg);
          await srv.closed(1);
          assert.equal((await ok(send(pool))).body.toString(), "ok");
          assert.equal(srv.connections, 2);
        },
      );
    });

  test("a head over 64 KiB → H1_PROTOCOL; one just under is fine", async () => {
    const big = (n: number) => `HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(n)}\r\nContent-Length: 2\r\n\r\nok`;
    const over = Buffer.from(big(70 * 1024));
    const under = big(60 * 1024);
    await withServer(
      (req) => {
        if (req.conn === 1) void writePieces(req.sock, over, [1000, 20_000, 40_000, 65_000]);
        else req.sock.write(under);
      },
      async (srv, pool) => {
        const o = await failed(send(pool), ["H1_PROTOCOL"]);
        assert.match(o.error!.message, /response head larger than 65536 bytes/);
        const u = await ok(send(pool));
        assert.equal(u.headers!.fields["x-big"]!.length, 60 * 1024);
        assert.equal(srv.connections, 2);
      },
    );
  });

  test("bytes after a response on an idle connection: no crash, no callback, the next request gets a new connection", async () => {
    let gotResponse!: () => void;
    const responded = new Promise<void>((r) => {
      gotResponse = r;
    });
    await withServer(
      (req) => {
        req.sock.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        if (req.conn === 1) void responded.then(() => req.sock.write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
      },
      async (srv, pool) => {
        const a = await ok(send(pool, "/", "", { onEnd: () => gotResponse() }));
        // The client drops the connection that spoke out of turn.
        await srv.closed(1);
        assert.equal(pool.size, 0);
        assert.equal((await ok(send(pool))).body.toString(), "ok");
        assert.equal(srv.connections, 2);
        assert.equal(a.ends, 1);
      },
    );
  });

  for (const [name, raw] of [
    ["Content-Length: 2", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokGARBAGE"],
    ["chunked", `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\nGARBAGE`],
    ["Content-Length: 0", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nGARBAGE"],
  ] as const)
    test(`bytes after a response in the same read (${name}) → the response completes, the connection is not reused`, {}, async () => {
      await withServer(
        (req) => req.sock.write(req.conn === 1 ? raw : "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        async (srv, pool) => {
          const a = await ok(send(pool));
          assert.equal(a.body.toString(), name === "Content-Length: 0" ? "" : "ok");
          await ok(send(pool));
          assert.equal(srv.connections, 2);
        },
      );
    });
});

describe("preconnect", () => {
  test("opens n connections before any request, within the pool's limit; requests then open none", async () => {
    await withServer(
      (req) => req.sock.write(resp(`${req.conn}/${req.n}`)),
      async (srv, pool) => {
        await pool.preconnect(5);
        assert.equal(pool.size, 3);
        assert.equal(srv.requests.length, 0);
        const outs = await Promise.all([send(pool), send(pool), send(pool)].map(ok));
        assert.deepEqual(outs.map((o) => o.body.toString().split("/")[1]).sort(), ["1", "1", "1"]);
        assert.equal(srv.connections, 3);
        await pool.preconnect(3);
        assert.equal(srv.connections, 3, "already at the limit: nothing more opened");
      },
      { connections: 3 },
    );
  });

  test("a preconnected connection the server closed while idle is retried once, like a reused one", async () => {
    await withServer(
      (req) => {
        if (req.conn === 1) req.sock.destroy();
        else req.sock.write(resp(`${req.conn}/${req.n}`));
      },
      async (srv, pool) => {
        await pool.preconnect(1);
        assert.equal((await ok(send(pool, "/x"))).body.toString(), "2/1");
        assert.deepEqual(
          srv.requests.map((r) => `${r.conn}/${r.n} ${r.path}`),
          ["1/1 /x", "2/1 /x"],
        );
      },
    );
  });

  test("to a closed port: resolves without error, opens nothing, and the first request reports ECONNREFUSED", async () => {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const port = (s.address() as net.AddressInfo).port;
    await new Promise<void>((r) => s.close(() => r()));
    const pool = new H1Pool(`http://127.0.0.1:${port}`);
    try {
      await pool.preconnect(4);
      assert.equal(pool.size, 0);
      await failed(send(pool), ["ECONNREFUSED"]);
    } finally {
      pool.close();
    }
  });
});

describe("pool limits, abort and close", () => {
  test("connections: 2 with 5 concurrent requests: never more than 2 sockets, all 5 complete", async () => {
    await withServer(
      (req) => setTimeout(() => req.sock.write(`HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n${req.conn}${req.n}`), 3),
      async (srv, pool) => {
        const all = Array.from({ length: 5 }, () => send(pool));
        assert.ok(pool.size <= 2);
        const outs = await Promise.all(all.map((p) => ok(p)));
        assert.equal(srv.maxOpen, 2);
        assert.equal(srv.connections, 2);
        assert.equal(srv.requests.length, 5);
        // Each response names the connection and the request number on it: all 5 went over those 2.
        assert.deepEqual(outs.map((o) => o.body.toString()).sort(), srv.requests.map((r) => `${r.conn}${r.n}`).sort());
      },
      { connections: 2 },
    );
  });

  test("abort() of a queued request and of an in-flight one: H1_ABORTED exactly once each", async () => {
    const held: RawReq[] = [];
    await withServer(
      (req) => {
        if (req.path === "/hold") held.push(req);
        else req.sock.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
      },
      async (srv, pool) => {
        const a = send(pool, "/hold");
        const b = send(pool, "/queued");
        while (held.length === 0) await immediate();
        b.abort("user gave up");
        const bo = await failed(b, ["H1_ABORTED"]);
        assert.equal(bo.error!.message, "user gave up");
        b.abort("again");
        a.abort("stop now");
        const ao = await failed(a, ["H1_ABORTED"]);
        assert.equal(ao.error!.message, "stop now");
        a.abort("again");
        await once(ao);
        await once(bo);
        await srv.closed(1);
        assert.deepEqual(
          srv.requests.map((r) => r.path),
          ["/hold"],
          "the queued request was never sent",
        );
        // The slot is free again.
        assert.equal((await ok(send(pool, "/next"))).body.toString(), "ok");
      },
      { connections: 1 },
    );
  });

  test("abort() or close() from inside onBody: no further onBody, H1_ABORTED once, the connection closed", async () => {
    const raw = `${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n`;
    for (const [how, cuts, want] of [
      ["abort", [raw.indexOf("abc") + 1], "a"],
      ["close", [raw.indexOf("abc") + 1], "a"],
      // All in one read: the rest of that read is not delivered either.
      ["abort", [], "abc"],
      ["close", [], "abc"],
    ] as const) {
      await withServer(
        (req) => void writePieces(req.sock, Buffer.from(raw), [...cuts]),
        async (srv, pool) => {
          let h: ReturnType<typeof send> | null = null;
          h = send(pool, "/", "", {
            onBody: () => (how === "abort" ? h!.abort("enough") : pool.close()),
          });
          const o = await failed(h, ["H1_ABORTED"]);
          assert.equal(o.reads.length, 1, "no onBody after the abort");
          assert.equal(o.body.toString(), want);
          await srv.closed(1);
          assert.equal(pool.size, 0);
        },
      );
    }
  });

  test("an aborted in-flight request frees its slot for the queued one", async () => {
    await withServer(
      (req) => {
        if (req.path !== "/hold") req.sock.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
      },
      async (srv, pool) => {
        const a = send(pool, "/hold");
        const b = send(pool, "/after");
        while (srv.requests.length === 0) await immediate();
        a.abort("x");
        await failed(a, ["H1_ABORTED"]);
        assert.equal((await ok(b)).body.toString(), "ok");
        // The aborted request's connection was closed, not reused: the queued one went out on a new one.
        assert.deepEqual(
          srv.requests.map((r) => `${r.conn} ${r.path}`),
          ["1 /hold", "2 /after"],
        );
      },
      { connections: 1 },
    );
  });

  test("close() fails the in-flight and the queued requests once each, closes sockets, refuses new ones", async () => {
    await withServer(
      () => {},
      async (srv, pool) => {
        const a = send(pool, "/a");
        const b = send(pool, "/b");
        const c = send(pool, "/c");
        while (srv.requests.length < 2) await immediate();
        pool.close();
        for (const p of [a, b, c]) {
          const o = await failed(p, ["H1_ABORTED"]);
          assert.match(o.error!.message, /closed/);
        }
        assert.equal(pool.size, 0);
        await srv.closed(1);
        await srv.closed(2);
        assert.equal(srv.connections, 2);
        const d = await failed(send(pool), ["H1_ABORTED"]);
        assert.match(d.error!.message, /the client was closed/);
        assert.equal(srv.connections, 2);
      },
      { connections: 2 },
    );
  });
});

describe("connect errors", () => {
  test("ECONNREFUSED for a closed port", async () => {
    const s = net.createServer();
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    const port = (s.address() as net.AddressInfo).port;
    await new Promise<void>((r) => s.close(() => r()));
    const pool = new H1Pool(`http://127.0.0.1:${port}`);
    try {
      const o = await failed(send(pool), ["ECONNREFUSED"]);
      assert.match(o.error!.message, /ECONNREFUSED/);
      assert.equal(pool.size, 0);
    } finally {
      pool.close();
    }
  });

  test("connect timeout: a listener whose accept queue is full drops the SYN → H1_CONNECT_TIMEOUT", async () => {
    // The listener lives on a worker thread whose event loop is blocked, so nothing ever accepts; once
    // the kernel's accept queue (backlog 1) is full, Linux drops further SYNs and connect() just waits.
    const flag = new Int32Array(new SharedArrayBuffer(4));
    const w = new Worker(
      `const { workerData, parentPort } = require("node:worker_threads");
       const srv = require("node:net").createServer();
       srv.listen({ host: "127.0.0.1", port: 0, backlog: 1 }, () => {
         parentPort.postMessage(srv.address().port);
         Atomics.wait(workerData, 0, 0, 10000);
       });`,
      { eval: true, workerData: flag },
    );
    const fillers: net.Socket[] = [];
    const pool: { p: H1Pool | null } = { p: null };
    try {
      const port = await new Promise<number>((r) => w.once("message", r));
      // Fill the accept queue: connect until one does not complete.
      for (let i = 0; i < 16; i++) {
        const s = net.connect({ host: "127.0.0.1", port });
        s.on("error", () => {});
        fillers.push(s);
        await Promise.race([new Promise((r) => s.once("connect", r)), sleep(150)]);
        // A timer can fire before a busy loop's poll phase sees the connect: look again after it.
        await immediate();
        if (s.connecting) break;
      }
      assert.ok(fillers.at(-1)!.connecting, "the accept queue never filled up");
      pool.p = new H1Pool(`http://127.0.0.1:${port}`, { connectTimeoutMs: 150 });
      const t0 = performance.now();
      const p = send(pool.p);
      // Guard: were the queue not full, the connect would succeed and no answer would ever come.
      const guard = setTimeout(() => p.abort("no connect timeout within 3 s"), 3000);
      const o = await failed(p, ["H1_CONNECT_TIMEOUT"]).finally(() => clearTimeout(guard));
      const took = performance.now() - t0;
      assert.ok(took >= 140 && took < 1000, `took ${took} ms`);
      assert.match(o.error!.message, new RegExp(`connect timeout after 150 ms \\(127\\.0\\.0\\.1:${port}\\)`));
      assert.equal(pool.p.size, 0);
    } finally {
      pool.p?.close();
      for (const s of fillers) s.destroy();
      Atomics.store(flag, 0, 1);
      Atomics.notify(flag, 0);
      await w.terminate();
    }
  });

  test("https origins are refused", () => {
    assert.throws(() => new H1Pool("https://127.0.0.1:1"), /plain http only/);
  });
});

describe("the shared read buffer", () => {
  test("two connections streaming at once each get exactly their own bytes", async () => {
    const bodyFor = (tag: string) =>
      Array.from({ length: 60 }, (_, i) => `data: {"stream":"${tag}","i":${i},"pad":"${tag.repeat(i % 7)}"}\n\n`).join(
        "",
      );
    const frames = (body: string) => {
      const b = Buffer.from(body);
      const out: Buffer[] = [Buffer.from(`${OK_HEAD}Transfer-Encoding: chunked\r\n\r\n`)];
      for (let p = 0, k = 1; p < b.length; p += k, k = (k * 7) % 61 || 1) {
        const part = b.subarray(p, Math.min(b.length, p + k));
        out.push(Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from("\r\n")]));
      }
      out.push(Buffer.from("0\r\n\r\n"));
      return out;
    };
    const waiting: RawReq[] = [];
    await withServer(
      (req) => {
        waiting.push(req);
        if (waiting.length < 2) return;
        // Both requests are in: interleave the two responses write by write.
        void (async () => {
          const [x, y] = waiting as [RawReq, RawReq];
          const fx = frames(bodyFor(x.path.slice(1)));
          const fy = frames(bodyFor(y.path.slice(1)));
          for (let i = 0; i < Math.max(fx.length, fy.length); i++) {
            if (fx[i]) x.sock.write(fx[i]!);
            if (fy[i]) y.sock.write(fy[i]!);
            await immediate();
          }
        })();
      },
      async (srv, pool) => {
        const a = send(pool, "/A");
        const b = send(pool, "/B");
        const [oa, ob] = await Promise.all([ok(a), ok(b)]);
        assert.equal(srv.connections, 2);
        assert.equal(oa.body.toString(), bodyFor("A"));
        assert.equal(ob.body.toString(), bodyFor("B"));
        // Both connections were handed ranges of the same buffer: the copy above is what kept them apart.
        assert.equal(oa.bufs.size, 1);
        assert.deepEqual([...oa.bufs], [...ob.bufs]);
        assert.ok(new Set(oa.reads).size > 5 && new Set(ob.reads).size > 5, "the streams were interleaved");
      },
    );
  });
});

describe("SseParser.feedRange over a reused buffer", () => {
  const STREAM = Buffer.from(
    ": comment line\n\n" +
      'data: {"choices":[{"text":"héllo 🙂"}]}\n\n' +
      'event: message\r\ndata:{"a":1}\r\n\r\n' +
      "data: line1\ndata: line2\ndata: line3\n\n" +
      `data: ${"x".repeat(300)}\n\n` +
      "id: 7\nretry: 10\ndata: [DONE]\n\n" +
      'event: error\ndata: {"error":{"message":"boom"}}\r\n\r\n' +
      "data: trailing without blank line",
  );

  const viaFeed = (): SseMessage[] => {
    const p = new SseParser();
    const out: SseMessage[] = [];
    p.feed(Buffer.from(STREAM), (m) => out.push(m));
    const last = p.finish();
    if (last) out.push(last);
    return out;
  };

  // Garbage full of the bytes a careless scan would trip on: LFs, "data:", colons.
  const garbage = (b: Buffer, seed: number) => {
    const pat = Buffer.from(`\n\ndata: GARBAGE ${seed}:\r\n:${seed}\n`);
    for (let i = 0; i < b.length; i++) b[i] = pat[(i + seed) % pat.length]!;
  };

  test("any split, buffer overwritten after every call, sentinel restored: messages identical to feed()", () => {
    const want = viaFeed();
    assert.equal(want.length, 7);
    const shared = Buffer.alloc(1024);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: STREAM.length - 1 }), { maxLength: 30 }),
        fc.array(fc.oneof(fc.constant(-1), fc.nat(400)), { minLength: 31, maxLength: 31 }),
        fc.nat(1000),
        (cuts, offsets, seed) => {
          const at = [...cuts].sort((a, b) => a - b);
          const p = new SseParser();
          const got: SseMessage[] = [];
          let prev = 0;
          let k = 0;
          for (const c of [...at, STREAM.length]) {
            const piece = STREAM.subarray(prev, c);
            prev = c;
            garbage(shared, seed + k);
            // -1: the range ends at the very end of the buffer (no byte after it to use as a sentinel).
            const o = offsets[k]!;
            const start = o < 0 ? shared.length - piece.length : o;
            k++;
            piece.copy(shared, start);
            const before = Buffer.from(shared);
            p.feedRange(shared, start, start + piece.length, (b, s, e, bytes, event) => {
              got.push({ data: b.toString("utf8", s, e), event, bytes });
            });
            assert.ok(shared.equals(before), "feedRange changed the caller's buffer");
          }
          garbage(shared, seed + 999);
          const last = p.finish();
          if (last) got.push(last);
          assert.deepEqual(got, want);
        },
      ),
      { numRuns: 150 },
    );
  });

  test("one byte at a time into the same slot of the buffer", () => {
    const shared = Buffer.alloc(8);
    const p = new SseParser();
    const got: SseMessage[] = [];
    for (let i = 0; i < STREAM.length; i++) {
      shared[3] = STREAM[i]!;
      p.feedRange(shared, 3, 4, (b, s, e, bytes, event) => got.push({ data: b.toString("utf8", s, e), event, bytes }));
      garbage(shared, i);
    }
    const last = p.finish();
    if (last) got.push(last);
    assert.deepEqual(got, viaFeed());
  });
});

describe("end to end through StreamClient against the simulator", { timeout: 60_000 }, () => {
  test('transport "h1" and "undici" give identical token and chunk counts per request', async () => {
    const sim = await spawnSim(["--speed", "zero", "--seed", "3"]);
    try {
      const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as { data: { id: string }[] };
      const model = models.data[0]!.id;
      const bodies = [1, 2, 17, 64, 150].map((n, i) =>
        JSON.stringify({
          model,
          prompt: `prompt number ${i} `.repeat(5 + i),
          max_tokens: n,
          ignore_eos: true,
          stream: true,
          stream_options: { include_usage: true, continuous_usage_stats: true },
        }),
      );
      const chat = JSON.stringify({
        model,
        messages: [{ role: "user", content: "hello there" }],
        max_completion_tokens: 40,
        max_tokens: 40,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      });
      const run = async (transport: "h1" | "undici") => {
        const client = new StreamClient(sim.url, { transport, connectTimeoutMs: 5000 });
        assert.equal(client.transport, transport);
        try {
          const origin = performance.now();
          const recs = await Promise.all([
            ...bodies.map((b) => client.stream("/v1/completions", b, blankRecord(), origin)),
            client.stream("/v1/chat/completions", chat, blankRecord(), origin),
          ]);
          // And sequentially on the kept-alive connections.
          for (const b of bodies.slice(0, 3))
            recs.push(await client.stream("/v1/completions", b, blankRecord(), origin));
          return recs;
        } finally {
          await client.close();
        }
      };
      const facts = (r: RequestRecord) => ({
        error: r.errorClass && `${r.errorClass}: ${r.errorMessage}`,
        status: r.status,
        completionTokens: r.completionTokens,
        outputTokens: r.outputTokens,
        fromUsage: r.outputTokensFromUsage,
        finishReason: r.finishReason,
        chunks: r.chunks.tMs.length,
        tokensInChunks: r.chunks.tokens.reduce((a, x) => a + Math.max(0, x), 0),
        flags: [...r.chunks.flags].join(""),
      });
      const h1 = (await run("h1")).map(facts);
      const und = (await run("undici")).map(facts);
      assert.deepEqual(h1, und);
      assert.deepEqual(
        h1.map((f) => [f.error, f.completionTokens]),
        [1, 2, 17, 64, 150, 40, 1, 2, 17].map((n) => [null, n]),
      );
    } finally {
      await sim.stop();
    }
  });
});
