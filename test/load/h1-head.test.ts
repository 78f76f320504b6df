// parseResponseHead reads a head from its bytes (no string per line or name). Checked against the
// string parser it replaced (split lines, a status regex, slice/trim/lowerCase per field), kept here
// as the reference, on generated heads: valid and broken status lines, known names in any case,
// unknown ones, repeats, padding with every character trim() strips, CRLF and bare LF.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { parseResponseHead } from "../../src/load/h1.ts";

function reference(text: string): ReturnType<typeof parseResponseHead> {
  const lines = text.split(/\r?\n/);
  const m = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0] ?? "");
  if (!m) return { error: `not an HTTP/1.x response: ${JSON.stringify((lines[0] ?? "").slice(0, 80))}` };
  const status = Number(m[2]);
  if (status >= 100 && status < 200) return { status, minor: Number(m[1]), reason: "", fields: {} };
  const fields: Record<string, string> = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (!line) continue;
    const c = line.indexOf(":");
    if (c <= 0) return { error: `bad header line ${JSON.stringify(line.slice(0, 80))}` };
    const name = line.slice(0, c).trim().toLowerCase();
    const value = line.slice(c + 1).trim();
    fields[name] = fields[name] === undefined ? value : `${fields[name]}, ${value}`;
  }
  return { status, minor: Number(m[1]), reason: m[3] ?? "", fields };
}

const parse = (text: string, junkAfter = "") => {
  // The connection's head buffer is reused: bytes past len are another response's and must not count.
  const b = Buffer.from(text + junkAfter, "latin1");
  return parseResponseHead(b, Buffer.byteLength(text, "latin1"));
};

const pad = fc.string({ unit: fc.constantFrom(" ", "\t", "\v", "\f", "\xa0"), maxLength: 2 });
const token = fc.string({ unit: fc.constantFrom(..."abcXYZ-_09"), minLength: 1, maxLength: 8 });
const known = fc
  .constantFrom(
    "Content-Type",
    "content-length",
    "TRANSFER-ENCODING",
    "Connection",
    "Keep-Alive",
    "Date",
    "X-Request-Id",
    "vary",
  )
  .chain((n) =>
    fc
      .array(fc.boolean(), { minLength: n.length, maxLength: n.length })
      .map((up) => [...n].map((c, i) => (up[i] ? c.toUpperCase() : c.toLowerCase())).join("")),
  );
const value = fc.string({ unit: fc.constantFrom(..."ab 1,;=:é\xa0\t"), maxLength: 10 });
const field = fc
  .tuple(pad, fc.oneof(known, token, fc.constant("")), pad, fc.boolean(), value)
  .map(([p1, n, p2, colon, v]) => `${p1}${n}${p2}${colon ? ":" : ""}${v}`);
const statusLine = fc.oneof(
  fc
    .tuple(
      fc.constantFrom("0", "1"),
      fc.integer({ min: 100, max: 599 }),
      fc.oneof(fc.constant(null), fc.constant(""), fc.constant("OK"), value),
    )
    .map(([v, s, r]) => `HTTP/1.${v} ${s}${r === null ? "" : ` ${r}`}`),
  fc.constantFrom(
    "HTTP/1.2 200 OK",
    "HTTP/2 200",
    "http/1.1 200 OK",
    "HTTP/1.1 20 OK",
    "HTTP/1.1 2000",
    "HTTP/1.1 200\rOK",
    "",
    "garbage",
  ),
);

describe("parseResponseHead", () => {
  test("agrees with the string parser on generated heads (CRLF and bare LF, junk after the head)", () => {
    fc.assert(
      fc.property(
        statusLine,
        fc.array(field, { maxLength: 8 }),
        fc.boolean(),
        fc.string({ maxLength: 6 }),
        (sl, fs, crlf, junk) => {
          const eol = crlf ? "\r\n" : "\n";
          const text = [sl, ...fs.filter((f) => f !== "")].join(eol) + eol + eol;
          assert.deepEqual(parse(text, junk), reference(text));
        },
      ),
      { numRuns: 3000 },
    );
  });

  test("a vLLM (uvicorn) head and an inferscope sim head", () => {
    const uvicorn =
      "HTTP/1.1 200 OK\r\ndate: Sat, 05 Dec 2026 06:52:34 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n";
    assert.deepEqual(parse(uvicorn), {
      status: 200,
      minor: 1,
      reason: "OK",
      fields: {
        date: "Sat, 05 Dec 2026 06:52:34 GMT",
        server: "uvicorn",
        "content-type": "text/event-stream; charset=utf-8",
        "transfer-encoding": "chunked",
      },
    });
    const sim =
      "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 103\r\nDate: Sat, 05 Dec 2026 06:52:34 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\r\n";
    assert.deepEqual(parse(sim), reference(sim));
    assert.equal((parse(sim) as { reason: string }).reason, "Not Found");
  });
});
