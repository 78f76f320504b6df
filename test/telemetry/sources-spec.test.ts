// The --telemetry value: every source kind, the @INTERVAL suffix, URLs, and the errors a user sees.
import assert from "node:assert/strict";
import { test } from "node:test";
import { UsageError } from "../../src/errors.ts";
import { formatTelemetrySpec, parseTelemetrySpec, specIntervalMs } from "../../src/telemetry/spec.ts";

test("each kind parses; dcgm:URL without a path means /metrics", () => {
  assert.deepEqual(parseTelemetrySpec("auto"), { kind: "auto" });
  assert.deepEqual(parseTelemetrySpec("none"), { kind: "none" });
  assert.deepEqual(parseTelemetrySpec("nvidia-smi"), { kind: "nvidia-smi" });
  assert.deepEqual(parseTelemetrySpec("amd-smi"), { kind: "amd-smi" });
  assert.deepEqual(parseTelemetrySpec(" CPU "), { kind: "cpu" });
  assert.deepEqual(parseTelemetrySpec("dcgm:http://10.0.0.7:9400"), {
    kind: "dcgm",
    url: "http://10.0.0.7:9400/metrics",
  });
  assert.deepEqual(parseTelemetrySpec("dcgm:https://gpu-node/exporter/metrics"), {
    kind: "dcgm",
    url: "https://gpu-node/exporter/metrics",
  });
  assert.deepEqual(parseTelemetrySpec("prometheus:http://prom:9090/"), { kind: "prometheus", url: "http://prom:9090" });
});

test("@INTERVAL suffix, a separate interval flag, and the defaults", () => {
  assert.deepEqual(parseTelemetrySpec("nvidia-smi@200ms"), { kind: "nvidia-smi", intervalMs: 200 });
  assert.deepEqual(parseTelemetrySpec("nvidia-smi@250"), { kind: "nvidia-smi", intervalMs: 250 });
  assert.deepEqual(parseTelemetrySpec("dcgm:http://h:9400@2s"), {
    kind: "dcgm",
    url: "http://h:9400/metrics",
    intervalMs: 2000,
  });
  // A URL's own @ (credentials) is not an interval.
  assert.deepEqual(parseTelemetrySpec("prometheus:http://u:p@prom:9090"), {
    kind: "prometheus",
    url: "http://u:p@prom:9090",
  });
  assert.deepEqual(parseTelemetrySpec("cpu@1s", { intervalMs: 300 }), { kind: "cpu", intervalMs: 300 });
  assert.deepEqual(parseTelemetrySpec("auto@500ms"), { kind: "auto", intervalMs: 500 });
  assert.equal(specIntervalMs({ kind: "nvidia-smi" }), 100);
  assert.equal(specIntervalMs({ kind: "dcgm", url: "http://x/metrics" }), 1000);
  assert.equal(specIntervalMs({ kind: "cpu", intervalMs: 250 }), 250);
  assert.equal(specIntervalMs({ kind: "none" }), undefined);
  assert.equal(
    formatTelemetrySpec({ kind: "dcgm", url: "http://h:9400/metrics", intervalMs: 500 }),
    "dcgm:http://h:9400/metrics@500ms",
  );
});

test("bad values are usage errors that name the flag", () => {
  const bad: Array<[string, RegExp]> = [
    ["", /--telemetry: empty value/],
    ["nvml", /--telemetry: unknown source "nvml" in "nvml" \(one of auto, none, nvidia-smi, dcgm:URL/],
    ["http://h:9400/metrics", /unknown source "http"/],
    ["dcgm", /"dcgm" needs a URL: dcgm:http:\/\/HOST:PORT/],
    ["dcgm:", /"dcgm" needs a URL/],
    ["dcgm:not a url", /--telemetry: not a URL after "dcgm:"/],
    ["dcgm:ftp://h/metrics", /only http:\/\/ and https:\/\/ URLs are read, got "ftp:"/],
    ["prometheus:file:///tmp/x", /only http:\/\/ and https:\/\/ URLs/],
    ["nvidia-smi:0", /"nvidia-smi" takes no argument/],
    ["nvidia-smi@10ms", /sampling interval must be between 50 ms and 60 s, got 10 ms/],
    ["cpu@5m", /between 50 ms and 60 s, got 300000 ms/],
    ["none@1s", /"none" records nothing/],
  ];
  for (const [text, re] of bad)
    assert.throws(
      () => parseTelemetrySpec(text),
      (e: unknown) => e instanceof UsageError && e.exitCode === 2 && re.test(e.message),
      text,
    );
  assert.throws(
    () => parseTelemetrySpec("cpu", { intervalMs: 5, intervalFlag: "--telemetry-interval" }),
    /--telemetry-interval: the sampling interval must be between 50 ms/,
  );
  assert.throws(
    () => parseTelemetrySpec("x", { flag: "telemetry watch SOURCE" }),
    /^UsageError: telemetry watch SOURCE: unknown/,
  );
});
