import assert from "node:assert/strict";
import { test } from "node:test";
import { SEED_DEPLOYMENT } from "../../src/model/examples.ts";
import { explain } from "../../src/model/explain.ts";
import { fit } from "../../src/model/fit.ts";
import { loadMeasurements } from "../../src/model/io.ts";
import { measurementsFromDoc, parseMeasurementsText } from "../../src/model/measurements.ts";
import { predict } from "../../src/model/predict.ts";
import type { ModelInput } from "../../src/model/resolve.ts";
import { ceilings, whatif } from "../../src/model/whatif.ts";

const fx = (f: string) => new URL(`./fixtures/${f}`, import.meta.url).pathname;

test("seed fit + explain reproduce seed-scenario.md §3 arithmetic", () => {
  const m = loadMeasurements(fx("seed-measurements.json"));
  const f = fit(SEED_DEPLOYMENT, m);
  const d = (name: string) => f.derived.filter((x) => x.name === name);
  // §3.5: 3.83 ms per token, 24.5 µs per all-reduce (24.4 if 157 calls).
  const ab = d("ab-per-call")[0];
  assert.equal(Number(ab.values.deltaMsPerToken).toFixed(2), "3.83");
  assert.equal(Number(ab.values.perCallUs).toFixed(1), "24.5");
  assert.equal(Number(ab.values.perCallUsWithEmbedding).toFixed(1), "24.4");
  const arms = d("ab-arms")[0];
  assert.match(arms.text, /17\.3 ms\/token \(17\.1 ms without TTFT\), 57\.7 tok\/s/);
  assert.match(arms.text, /21\.2 ms\/token \(20\.9 ms without TTFT\), 47\.2 tok\/s/);
  // §3.6: per-call cost implied by each share assumption.
  const shares = d("share-per-call").map((x) => Number(x.values.perCallUs).toFixed(1));
  assert.deepEqual(shares, ["61.3", "72.5"]);
  assert.deepEqual(
    d("share-per-call").map((x) => Number(x.values.restMs).toFixed(2)),
    ["7.83", "6.09"],
  );
  assert.match(d("share-vs-isolated")[0].text, /2\.3–2\.7× the isolated/);
  assert.match(d("share-vs-isolated")[0].text, /3\.0–3\.5× NCCL's LL model \(20\.6 µs\)/);
  // §3.7: weight-streaming floor per precision assumption at 1458 GB/s.
  assert.deepEqual(
    f.facts.floors.map((x) => x.ms.toFixed(1)),
    ["2.0", "3.8", "4.2"],
  );
  // §3.5: the baseline ITL matches the LL arm, not the default arm.
  assert.equal(f.consistency.length, 1);
  assert.match(f.consistency[0], /matches the NCCL_PROTO=LL arm/);
  assert.match(f.consistency[0], /not the default arm/);
  // The LL variant's per-call change is pinned by the A/B and close to −24.5 µs.
  const ll = f.parameters.find((p) => p.name.startsWith("dAR:"))!;
  assert.ok(ll.pinned);
  assert.ok(ll.posterior.mean < -18 && ll.posterior.mean > -28, String(ll.posterior.mean));
  // One ITL cannot separate bandwidth, per-call latency and fixed overhead: said so.
  for (const n of ["invEta", "arLatUs", "skewUs"]) assert.ok(f.notPinned.includes(n), n);
  assert.ok(f.parameters.find((p) => p.name === "invEta")!.why!.length > 10);
  // Calibrated prediction reproduces the measured ITL.
  assert.ok(Math.abs(f.prediction.decode.stepMs.mid - 17.4) < 0.3);
  const sentences = explain(f.prediction, f);
  assert.ok(sentences.some((s) => /24\.5 µs/.test(s)));
  assert.ok(sentences.some((s) => /LL arm/.test(s)));
});

test("seed ceilings: §3.8 rows as ranges tied to named assumptions", () => {
  const f = fit(SEED_DEPLOYMENT, loadMeasurements(fx("seed-measurements.json")));
  const rows = ceilings(SEED_DEPLOYMENT, f);
  const by = (re: RegExp) => rows.find((r) => re.test(r.name))!;
  assert.equal(by(/measured baseline/).tokensPerSecond.low.toFixed(1), "57.5");
  const quoted = by(/quoted ceiling/);
  assert.deepEqual([quoted.tokensPerSecond.low, quoted.tokensPerSecond.high], [100, 140]);
  assert.equal(quoted.stepMs.low.toFixed(1), "7.1");
  const share = by(/rest from the share/);
  assert.deepEqual([share.stepMs.low.toFixed(1), share.stepMs.high.toFixed(1)], ["6.1", "7.8"]);
  assert.deepEqual([Math.round(share.tokensPerSecond.low), Math.round(share.tokensPerSecond.high)], [128, 164]);
  const iso = by(/isolated NCCL cost/);
  assert.deepEqual([iso.stepMs.low.toFixed(1), iso.stepMs.high.toFixed(1)], ["9.3", "14.2"]);
  assert.match(iso.assumption, /156 × 20\.6–26\.9 µs = 3\.2–4\.2 ms/);
  const floor = by(/weight-streaming floor/);
  assert.deepEqual([floor.stepMs.low.toFixed(1), floor.stepMs.high.toFixed(1)], ["2.0", "4.2"]);
  // The fitted bandwidth in whole GB/s, as a reader wants it (it printed 1458.1202710162886 once).
  assert.match(floor.assumption, /^weights at (spec|\d{1,3}(,\d{3})*) GB\/s, nothing else/);
  // A saved calibration (JSON round trip, no measurements given again) reproduces the fitted step.
  const saved = JSON.parse(JSON.stringify(f.calibration));
  assert.ok(
    Math.abs(predict({ ...SEED_DEPLOYMENT, calibration: saved }).decode.stepMs.mid - f.prediction.decode.stepMs.mid) <
      1e-6,
  );
  // Calibrated what-if: forcing LL uses the fitted A/B delta.
  const w = whatif({ ...SEED_DEPLOYMENT, calibration: f.calibration }, ["proto=LL"]);
  assert.ok(Math.abs(w[0].stepMs.mid - w[1].stepMs.mid - 3.8) < 0.4, `${w[0].stepMs.mid} vs ${w[1].stepMs.mid}`);
});

test("nccl-tests rows pin the isolated latency; a MoE batch sweep pins bandwidth vs fixed cost", () => {
  // Synthetic truth: a machine 10 % slower at streaming than the central model, with known fixed cost.
  const input: ModelInput = {
    model: "qwen3-30b-a3b",
    quant: "bf16",
    gpu: "l40s",
    gpus: 4,
    tp: 4,
    engine: "vllm",
    interconnect: "pcie4",
  };
  const truth = (b: number) => predict({ ...input, batch: b, measuredBandwidthGBs: 864 * 0.72 }).decode.stepMs.mid;
  const ms = [1, 2, 4, 8, 16].map((b) => ({ kind: "itl", batch: b, ms: truth(b), sd: 0.02 }));
  const nccl = {
    kind: "nccl-tests",
    rows: [
      { bytes: 8192, us: 13.0 },
      { bytes: 131072, us: 57.7 },
      { bytes: 2097152, us: 622.1 },
    ],
  };
  const f = fit(input, measurementsFromDoc([...ms, nccl]));
  const p = (n: string) => f.parameters.find((x) => x.name === n)!;
  assert.ok(p("arLatUs").pinned, p("arLatUs").why);
  assert.ok(p("arUsPerKB").pinned, p("arUsPerKB").why);
  // MoE (128 experts, top-8: the distinct experts read keep growing through batch 16, unlike Mixtral's 8, which are
  // all read by batch 8 and so move with the fixed and per-sequence host costs): the sweep's expert reads pin 1/η; the non-expert reads are the same at every
  // batch, so only their sum with the fixed per-step cost is measured — said so.
  assert.ok(p("invEtaExperts").pinned, p("invEtaExperts").why);
  assert.ok(!p("invEta").pinned);
  assert.match(p("invEta").why!, /fixedMs/);
  assert.ok(!p("prefillScale").pinned);
  assert.match(p("prefillScale").why!, /no measurement depends on it/);
  for (const r of f.residuals.filter((x) => x.unit === "ms"))
    assert.ok(Math.abs(r.fitted - r.measured) / r.measured < 0.05, `${r.label}: ${r.fitted} vs ${r.measured}`);
  // The calibration's routed-expert factor is the one at one token per expert, carried to each batch by the corpus
  // fit's small-M shape (expertSmallMShape), so calibrated and uncalibrated predictions share the batch dependence:
  // with nothing measured but the collectives, the calibrated step at batch 1 and 16 is the uncalibrated one. (The
  // residual check above once failed at 7 % under priors with a larger fitted small-M shortfall: the calibration's
  // expert factor was one constant for every batch, the corpus model's was not.)
  const prior = fit(input, measurementsFromDoc([nccl])).calibration;
  for (const b of [1, 16]) {
    const cal = predict({ ...input, batch: b, calibration: prior }).decode.stepMs.mid;
    const unc = predict({ ...input, batch: b }).decode.stepMs.mid;
    assert.ok(Math.abs(cal / unc - 1) < 0.08, `batch ${b}: calibrated at the prior ${cal} vs uncalibrated ${unc}`);
  }
});

test("measurement files: bench --save-result JSON, YAML, and errors with positions", () => {
  const bench = measurementsFromDoc({
    mean_itl_ms: 17.4,
    std_itl_ms: 2,
    mean_ttft_ms: 52,
    max_concurrency: 1,
    completed: 10,
    total_input_tokens: 1000,
    total_output_tokens: 1280,
  });
  assert.equal(bench.length, 2);
  assert.equal(bench[0].kind, "itl");
  assert.equal(bench[1].kind === "ttft" && bench[1].inputLen, 100);
  assert.throws(
    () => measurementsFromDoc([{ kind: "itl" }], "m.json"),
    /m\.json: measurement #1 \(itl\): missing number "ms"/,
  );
  assert.throws(() => measurementsFromDoc([{ kind: "warp" }], "m.json"), /unknown kind "warp"/);
  assert.throws(() => loadMeasurements(fx("topo-bad.txt")), /not a measurements file|invalid/);
});

test("YAML measurements with a length sweep and a context slope", () => {
  const yaml = `measurements:
  - kind: length-sweep
    slopeMsPerToken: 17.4
    interceptMs: 52
  - kind: context-slope
    msPerKToken: 0.06
    label: ITL drift per 1K tokens (DSA indexer scan)
  - kind: rate
    tokensPerSecond: 57.5
    batch: 1
`;
  const ms = parseMeasurementsText(yaml, "sweep.yaml");
  assert.deepEqual(
    ms.map((m) => m.kind),
    ["length-sweep", "context-slope", "itl"],
  );
  const f = fit(SEED_DEPLOYMENT, ms);
  assert.ok(f.residuals.some((r) => /length-sweep intercept/.test(r.label)));
  assert.ok(f.residuals.some((r) => r.unit === "ms/1K tokens"));
  assert.throws(
    () => parseMeasurementsText("measurements:\n  - kind: itl\n    ms: [1\n", "bad.yaml"),
    /bad\.yaml:\d+:\d+: invalid YAML/,
  );
});

test("a trace measurement pins the per-call all-reduce cost, so the zero-comm what-if removes what the trace measured", () => {
  // The study's sim profile: 20.9 ms steps, 157 all-reduces of 86.6 µs each in the trace (65 % of the step).
  const input: ModelInput = { ...SEED_DEPLOYMENT, batch: 1, inputLen: 512, outputLen: 128, contextLen: 576 };
  const step = 20.9;
  const perCall = 86.6;
  const calls = 157;
  const traced = step - (calls * perCall) / 1000;
  const others = measurementsFromDoc([
    { kind: "itl", ms: step, batch: 1, ci: [20.85, 20.95] },
    { kind: "ab", variantA: {}, variantB: { env: { NCCL_PROTO: "LL" } }, deltaMsPerToken: -3.2 },
  ]);
  const trace = measurementsFromDoc([
    {
      kind: "trace",
      allReduceUsPerCall: { value: perCall, ci: [86.3, 86.9] },
      allReduceCallsPerToken: calls,
      stepMs: { value: step, ci: [20.85, 20.95] },
      batch: 1,
    },
  ]);
  const zeroComm = (f: ReturnType<typeof fit>) =>
    whatif({ ...input, calibration: f.calibration }, ["zero-comm"]).find((w) => w.scenario === "zero-comm")!.stepMs;
  // Without the trace the fit cannot split the step between collectives and the rest: the collective cost is not
  // pinned and the zero-comm what-if is wide (it narrows to the trace's rest below).
  const before = fit(input, others);
  assert.ok(before.notPinned.includes("arLatUs"));
  const wide = zeroComm(before);
  const f = fit(input, trace);
  const row = f.residuals.find((r) => r.label.startsWith("all-reduce per call (trace)"))!;
  assert.ok(Math.abs(row.fitted - perCall) < 1, `fitted per call ${row.fitted}`);
  assert.ok(!f.notPinned.includes("fixedMs"));
  // The calibrated per-call cost is what predict() uses, and the zero-comm step brackets the trace's rest.
  assert.ok(Math.abs(f.prediction.collectives.latencyUsEach.mid - perCall) < 1.5);
  const zc = zeroComm(f);
  assert.ok(
    zc.low <= traced && traced <= zc.high,
    `zero-comm ${zc.low}–${zc.high} ms vs trace ${traced.toFixed(2)} ms`,
  );
  assert.ok(Math.abs(zc.mid - traced) < 0.1 * traced, `zero-comm mid ${zc.mid} vs ${traced}`);
  assert.ok(
    zc.high - zc.low < wide.high - wide.low,
    `with the trace ${zc.low}–${zc.high}, without ${wide.low}–${wide.high}`,
  );
  // The ceiling rows agree: the fitted zero-comm row and the trace's share row overlap.
  const rows = ceilings(input, f);
  const fz = rows.find((r) => r.name === "fitted model: zero-cost communication")!;
  const sh = rows.find((r) => r.name === "all-reduce free, rest from the share estimate")!;
  assert.ok(fz.tokensPerSecond.low <= sh.tokensPerSecond.high && sh.tokensPerSecond.low <= fz.tokensPerSecond.high);
  // 157 in the trace vs the model's 158 (it also counts the logits gather): said, not hidden.
  assert.ok(f.consistency.some((c) => /trace counts 157 all-reduce calls/.test(c)));
  // With the A/B as well, the LL variant delta stays pinned next to the trace row.
  const both = fit(input, [...trace, others[1]!]);
  assert.ok(both.parameters.find((p) => p.name.startsWith("dAR:"))!.pinned);
});

test("trace measurements in files: share form, protocol arm, and errors", () => {
  const [t] = parseMeasurementsText(
    `measurements:
  - kind: trace
    allReduceShare: {value: 65, ci: [64, 66]}
    stepMs: 20
    allReduceCallsPerToken: 100
    protocol: LL
`,
    "t.yaml",
  );
  assert.equal(t.kind, "trace");
  if (t.kind !== "trace") return;
  // 0.65 × 20 ms / 100 calls = 130 µs, [128, 132].
  assert.deepEqual(
    [t.allReduceUsPerCall.value, ...t.allReduceUsPerCall.ci!].map((x) => Number(x.toFixed(9))),
    [130, 128, 132],
  );
  assert.deepEqual(t.variant, { ncclProto: "LL" });
  // A trace taken on the LL arm fits the LL per-call delta, not the baseline.
  const f = fit(SEED_DEPLOYMENT, [t, { kind: "itl", ms: 20, batch: 1 }]);
  assert.ok(f.parameters.some((p) => p.name === "dAR:NCCL_PROTO=LL"));
  assert.throws(
    () => measurementsFromDoc([{ kind: "trace", stepMs: 20 }], "m.json"),
    /m\.json: measurement #1 \(trace\): needs "allReduceUsPerCall"/,
  );
  assert.throws(
    () => measurementsFromDoc([{ kind: "trace", allReduceShare: 0.6 }], "m.json"),
    /"allReduceShare" needs "stepMs" and "allReduceCallsPerToken"/,
  );
  assert.throws(
    () => measurementsFromDoc([{ kind: "trace", allReduceUsPerCall: { value: "x" } }], "m.json"),
    /"allReduceUsPerCall" must be a number or \{value, ci: \[low, high\]\}/,
  );
});

test("prior–data conflict: a step far outside the corpus prior is fitted by loosening the priors, and said; an agreeing one is not", () => {
  // The H200 gpt-fast Llama-3.1-8B-shaped deployment the telemetry capture ran (5.05 ms measured).
  const input: ModelInput = { model: "llama-3.1-8b", gpu: "h200", engine: "gptfast", quant: "bf16", batch: 1 };
  const agree = fit(input, [{ kind: "itl", ms: predict(input).decode.stepMs.mid, batch: 1, ci: [5.0, 5.1] }]);
  assert.ok(!agree.consistency.some((c) => /conflict/.test(c)), agree.consistency.join("\n"));
  // Twice the prior step (a contended or throttled box): the normal-prior compromise would miss it by > 3σ.
  const slow = 2 * predict(input).decode.stepMs.mid;
  const f = fit(input, [{ kind: "itl", ms: slow, batch: 1, ci: [slow * 0.97, slow * 1.03] }]);
  const note = f.consistency.find((c) => /Prior–data conflict/.test(c));
  assert.ok(note, f.consistency.join("\n"));
  assert.match(note!, /missed "ITL at batch 1" by [\d.]+σ/);
  assert.match(note!, /loosened: .*fixedMs|loosened: .*invEta/);
  const s = f.prediction.decode.stepMs;
  assert.ok(s.low <= slow && slow <= s.high, `calibrated ${s.low}–${s.high} vs measured ${slow}`);
  assert.ok(Math.abs(f.residuals[0]!.z) < 2, `fitted z ${f.residuals[0]!.z}`);
});

test("engine spans (server-split): the measured host part sets the host term within its CI, fixedMs keeps the kernels, the queue is compared with the workload's", () => {
  const input: ModelInput = { ...SEED_DEPLOYMENT, batch: 1, inputLen: 64, outputLen: 16, contextLen: 72 };
  const host = { value: 0.9, ci: [0.88, 0.92] as [number, number] };
  const split = {
    kind: "server-split" as const,
    requests: 12,
    stepMs: { value: 21.5, ci: [21.4, 21.6] as [number, number] },
    hostMs: host,
    queueMs: { value: 0.5, ci: [0.1, 0.9] as [number, number] },
    concurrency: 1,
  };
  const f = fit(input, [split]);
  const p = f.parameters.find((x) => x.name === "hostMs");
  assert.ok(p, "no hostMs parameter");
  // The prior is the model's engine term: vLLM overlaps its host work, so none of it is in the modelled step.
  assert.equal(p.prior.mean, 0);
  assert.match(p.priorFrom!, /engine term for vllm \(host overlapped/);
  assert.ok(p.posterior.mean >= host.ci[0] && p.posterior.mean <= host.ci[1], `host ${p.posterior.mean}`);
  assert.equal(p.pinned, true);
  assert.deepEqual(f.calibration.hostMs, { mean: p.posterior.mean, sd: p.posterior.sd });
  // fixedMs for predict() is kernels + host; the calibrated prediction shows the host part as its engine term.
  const kern = f.parameters.find((x) => x.name === "fixedMs")!;
  assert.match(kern.label, /kernels \(the host part is hostMs\)/);
  assert.ok(Math.abs(f.calibration.params.fixedMs!.mean - (kern.posterior.mean + p.posterior.mean)) < 1e-9);
  const engine = f.prediction.decode.terms.find((t) => t.name === "engine")!;
  assert.ok(Math.abs(engine.ms.mid - p.posterior.mean) < 1e-3, `engine term ${engine.ms.mid}`);
  assert.ok(Math.abs(f.prediction.decode.stepMs.mid - 21.5) < 0.3, `step ${f.prediction.decode.stepMs.mid}`);
  // Every row says where it came from.
  const labels = f.residuals.map((r) => r.label);
  assert.ok(labels.includes("engine host time per step (engine spans, 12 requests, detailed traces)"), labels.join());
  assert.ok(labels.includes("server decode step at batch 1 (engine spans, 12 requests, detailed traces)"));
  // One request at a time arrives at an idle engine in the model's schedule: no queue.
  assert.ok(
    f.consistency.some((c) =>
      /^Queue \(engine spans, 12 requests, detailed traces\): 0\.500 ms \[0\.100, 0\.900\] per request at concurrency 1; the model's workload schedule \(64 → 16 tokens\) puts it at 0\.000 ms: the engine queued 0\.500 ms more/.test(
        c,
      ),
    ),
    f.consistency.join("\n"),
  );
  // Without detailed traces: the step row only, the host term stays inside fixedMs at its prior.
  const plain = fit(input, [{ ...split, hostMs: undefined, queueMs: undefined }]);
  assert.ok(!plain.parameters.some((x) => x.name === "hostMs"));
  assert.deepEqual(
    plain.residuals.map((r) => r.label),
    ["server decode step at batch 1 (engine spans, 12 requests)"],
  );
  assert.equal(plain.calibration.hostMs, undefined);
});

test("the workload's queue wait: from arrival at the scheduler to the first step that carried the prompt", async () => {
  const { queueWaits } = await import("../../src/model/workload.ts");
  const r = { low: 10, mid: 10, high: 10 };
  const step = { decodes: 0, prefillTokens: 2048, ctx: 0, prefix: 0, ms: r, pureMs: r };
  // Sent at 0, 3 ms intake; the engine is busy until 10 ms; a 3,000-token prompt takes two 2,048-token steps (10–20,
  // 20–30), the first token at the end of the second: it queued 10 − 3 = 7 ms.
  const s = {
    steps: [step, step, step],
    stepEndMs: [10, 20, 30],
    requests: [{ inputLen: 3000, outputLen: 1, sentMs: 0, intakeMs: 3, tokenSteps: [2] }],
  };
  assert.deepEqual(queueWaits(s, 2048), [7]);
  // A prompt within the budget starts in its first token's step.
  assert.deepEqual(queueWaits({ ...s, requests: [{ ...s.requests[0]!, inputLen: 100, tokenSteps: [1] }] }, 2048), [7]);
});

test("server-split measurement files: parsed, and malformed ones name the file, the measurement and the field", () => {
  const [m] = parseMeasurementsText(
    JSON.stringify({
      measurements: [
        {
          kind: "server-split",
          requests: 12,
          stepMs: { value: 21.5, ci: [21.6, 21.4] },
          hostMs: 0.9,
          queueMs: { value: 0.4 },
          concurrency: 2,
        },
      ],
    }),
    "split.json",
  );
  assert.equal(m.kind, "server-split");
  if (m.kind !== "server-split") return;
  assert.deepEqual(m.stepMs, { value: 21.5, ci: [21.4, 21.6] });
  assert.deepEqual(m.hostMs, { value: 0.9 });
  assert.equal(m.concurrency, 2);
  const bad = (o: Record<string, unknown>, re: RegExp) =>
    assert.throws(() => parseMeasurementsText(JSON.stringify([{ kind: "server-split", ...o }]), "split.json"), re);
  bad(
    { stepMs: 21 },
    /split\.json: measurement #1 \(server-split\): "requests" must be a whole number ≥ 1 \(missing\)/,
  );
  bad({ requests: 2.5, stepMs: 21 }, /\(server-split\): "requests" must be a whole number ≥ 1$/);
  bad(
    { requests: 12 },
    /split\.json: measurement #1 \(server-split\): needs "stepMs" \(the server's decode step\) or "hostMs"/,
  );
  bad(
    { requests: 12, stepMs: "21" },
    /split\.json: measurement #1 \(server-split\): "stepMs" must be a number or \{value, ci/,
  );
  bad({ requests: 12, stepMs: { value: 21, ci: [1] } }, /\(server-split\): "stepMs" must be a number or/);
  bad({ requests: 12, stepMs: 1, hostMs: 2 }, /\(server-split\): "hostMs" \(2\) must be less than "stepMs" \(1\)/);
  bad({ requests: 12, hostMs: -0.1 }, /\(server-split\): "hostMs" must not be negative/);
  bad({ requests: 12, stepMs: 21, queueMs: -1 }, /\(server-split\): "queueMs" must not be negative/);
  bad({ requests: 12, stepMs: 21, concurrency: 0 }, /\(server-split\): "concurrency" must be a whole number ≥ 1/);
});
