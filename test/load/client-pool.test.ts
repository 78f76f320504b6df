// The stream handlers are pooled: a handler that settled mid-message (a cut stream leaves a partial
// line in its SSE parser, a failed flag, counters) must serve the next request as if new.
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { blankRecord, StreamClient } from "../../src/load/client.ts";

const chunk = (text: string, finish: string | null) =>
  `data: {"id":"c","object":"text_completion","choices":[{"index":0,"text":"${text}","finish_reason":${finish ? `"${finish}"` : "null"}}]}\n\n`;

let server: http.Server;
let url = "";
let served = 0;
before(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const n = served++;
      res.writeHead(200, { "content-type": "text/event-stream" });
      // Odd requests: two tokens, then half a message and a cut connection.
      if (n % 2 === 0) {
        res.write(chunk("a", null) + chunk("b", null));
        res.write('data: {"id":"c","choices":[{"index":0,"te');
        setImmediate(() => res.socket?.destroy());
        return;
      }
      res.end(`${chunk("x", null)}${chunk("y", null)}${chunk("z", "length")}data: [DONE]\n\n`);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

for (const transport of ["h1", "undici"] as const)
  test(`a pooled handler after a cut stream reads the next one cleanly (${transport})`, async () => {
    const client = new StreamClient(url, { transport, connections: 1 });
    await client.preconnect(1);
    try {
      for (let round = 0; round < 3; round++) {
        const cut = await client.stream("/v1/completions", "{}", blankRecord(), performance.now());
        assert.equal(cut.errorClass, "disconnect", `round ${round}: ${cut.errorMessage}`);
        assert.equal(cut.chunks.tMs.length, 2);
        const ok = await client.stream("/v1/completions", "{}", blankRecord(), performance.now());
        assert.equal(ok.errorClass, null, `round ${round}: ${ok.errorMessage}`);
        assert.equal(ok.status, 200);
        assert.equal(ok.finishReason, "length");
        // Three messages of its own: nothing of the cut stream's half line or counters carried over.
        assert.equal(ok.chunks.tMs.length, 3);
        assert.deepEqual([...ok.chunks.content], [1, 1, 1]);
        assert.equal(ok.outputTokens, 3);
        assert.ok(ok.firstChunkMs >= 0 && ok.endMs >= ok.firstChunkMs);
        // Its times are its own chunks' (the handler's times are reset, not the cut stream's).
        const t = ok.chunks.tMs;
        assert.equal(ok.firstChunkMs, t[0]);
        assert.equal(ok.firstOutputMs, t[0]);
        assert.equal(ok.firstContentMs, t[0]);
        assert.equal(ok.lastChunkMs, t[2]);
      }
    } finally {
      await client.close();
    }
  });
