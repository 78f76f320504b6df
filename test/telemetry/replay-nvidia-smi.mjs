// Stands in for the nvidia-smi binary's I/O in tests (no GPU here or in CI): installed as `nvidia-smi`
// on a temp PATH, it REPLAYS a real capture from an H200 (fixtures/h200-device-2026-12-04/smi-query.csv,
// taken with `--format=csv -lms 100`), row by row, at the -lms pace asked for, stamped with the current
// local time as nvidia-smi stamps its rows. It accepts exactly the field names (and aliases) of that
// driver's `--help-query-gpu` (help-query-gpu.txt), refuses others with nvidia-smi's own words and
// exit code 2, answers uuid/name from that machine's `nvidia-smi -q` (smi-q-after.txt), and honours
// csv's nounits/noheader. A field the driver knows but the capture lacks is refused loudly (exit 99):
// the replay never invents a value.
// Test knobs (environment): REPLAY_UNKNOWN_FIELDS=a,b (act as an older driver without them),
// REPLAY_EXIT_AFTER=n (exit 1 after n rows: the tool dying mid-run), REPLAY_MALFORMED_AT=n (row n cut
// short), REPLAY_GRANDCHILD_PIDFILE=path (start a child in our process group and write its pid there),
// REPLAY_FROM=n / REPLAY_COUNT=m (serve rows n … n+m−1 of the capture, then fall silent as a loop with nothing
// more to say would, until killed; with REPLAY_CUT_LAST=1 the last row is followed by half of the next one,
// without its newline, as a block-buffered pipe leaves it when the tool is stopped mid-line), REPLAY_PACE=capture (rows at the capture's own spacing instead of -lms, each
// stamped with its scheduled time: the replayed rows are the capture's, shifted in time as a whole).
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dir =
  process.env.REPLAY_DIR ?? join(dirname(fileURLToPath(import.meta.url)), "fixtures", "h200-device-2026-12-04");
const argv = process.argv.slice(2);
if (process.env.REPLAY_NO_DRIVER) {
  process.stdout.write(
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n\n",
  );
  process.exit(9);
}

function arg(name) {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === name) return argv[i + 1];
    if (argv[i].startsWith(`${name}=`)) return argv[i].slice(name.length + 1);
  }
  return undefined;
}

// --help-query-gpu: `"canonical"` or `"canonical" or "alias"` lines.
const known = new Map(); // any accepted name → canonical name
for (const line of readFileSync(join(dir, "help-query-gpu.txt"), "utf8").split("\n")) {
  const names = [...line.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
  if (!/^"[^"]+"( or "[^"]+")?$/.test(line.trim()) || names.length === 0) continue;
  for (const n of names) known.set(n, names[0]);
}
for (const n of (process.env.REPLAY_UNKNOWN_FIELDS ?? "").split(",").filter(Boolean)) known.delete(n);

// `dmon -s t -d N -o T`: the two header lines exactly as that driver prints them
// (h200-live-2026-12-04/dmon-t.txt, taken idle), then the PCIe columns (rxpci, txpci, MB/s) of the
// captured `dmon -s pucvmet -o T` under load (smi-dmon.txt), one row per N seconds, stamped with the
// current local time of day.
if (argv[0] === "dmon") {
  if (arg("-s") !== "t" || arg("-o") !== "T") {
    process.stderr.write("replay-nvidia-smi: only dmon -s t -o T is replayed\n");
    process.exit(99);
  }
  const head = readFileSync(join(dir, "..", "h200-live-2026-12-04", "dmon-t.txt"), "utf8")
    .split("\n")
    .slice(0, 2);
  const lines = readFileSync(join(dir, "smi-dmon.txt"), "utf8").trim().split("\n");
  const names = lines[0].slice(1).trim().split(/\s+/);
  const keep = ["gpu", "rxpci", "txpci"].map((c) => names.indexOf(c));
  const data = lines.slice(2).map((l) => l.trim().split(/\s+/));
  const rest = (cells) => cells.map((c) => String(c).padStart(6)).join(" ");
  process.stdout.write(`${head.join("\n")}\n`);
  const periodS = Number(arg("-d") ?? "1");
  const t0 = Date.now();
  let k = 0;
  const p2 = (n) => String(n).padStart(2, "0");
  const tick = () => {
    const d = new Date();
    const row = data[k % data.length];
    const time = `${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())}`;
    process.stdout.write(` ${time}    ${rest(keep.map((i) => row[i]))} \n`);
    k++;
    setTimeout(tick, Math.max(0, t0 + k * periodS * 1000 - Date.now()));
  };
  tick();
} else {
  main();
}

function main() {
  const query = arg("--query-gpu");
  if (!query) {
    process.stderr.write("replay-nvidia-smi: only --query-gpu is replayed\n");
    process.exit(99);
  }
  const format = (arg("--format") ?? "").split(",");
  const nounits = format.includes("nounits");
  const noheader = format.includes("noheader");
  const lms = arg("-lms") ?? arg("--loop-ms");
  const loopS = arg("-l") ?? arg("--loop");
  const periodMs = lms !== undefined ? Number(lms) : loopS !== undefined ? Number(loopS) * 1000 : null;

  const fields = query.split(",");
  for (const f of fields) {
    if (!known.has(f)) {
      // nvidia-smi's own message and exit code for an unknown field.
      process.stdout.write(`Field "${f}" is not a valid field to query.\n\n`);
      process.exit(2);
    }
  }

  const csv = readFileSync(join(dir, "smi-query.csv"), "utf8").trim().split("\n");
  const header = csv[0].split(", ");
  const col = new Map(header.map((h, i) => [h.replace(/ \[[^\]]*\]$/, ""), i]));
  const rows = csv.slice(1).map((l) => l.split(", "));
  const q = readFileSync(join(dir, "smi-q-after.txt"), "utf8");
  const fromQ = {
    uuid: /GPU UUID\s*:\s*(\S+)/.exec(q)?.[1],
    name: /Product Name\s*:\s*(.+)/.exec(q)?.[1].trim(),
  };

  const canon = fields.map((f) => known.get(f));
  for (const c of canon) {
    if (c !== "timestamp" && !col.has(c) && !(c in fromQ)) {
      process.stderr.write(`replay-nvidia-smi: the capture has no data for "${c}"\n`);
      process.exit(99);
    }
  }

  function stamp(d) {
    const p = (n, w = 2) => String(n).padStart(w, "0");
    return `${d.getFullYear()}/${p(d.getMonth() + 1)}/${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
  }

  function headerLine() {
    return canon
      .map((c) => {
        const i = col.get(c);
        const unit = i === undefined ? "" : (/ \[[^\]]*\]$/.exec(header[i])?.[0] ?? "");
        return `${c}${unit}`;
      })
      .join(", ");
  }

  const from = Number(process.env.REPLAY_FROM ?? "0");
  const count = process.env.REPLAY_COUNT ? Number(process.env.REPLAY_COUNT) : Infinity;
  const capturePace = process.env.REPLAY_PACE === "capture";
  // Each row's time in the capture (ms; only differences are used, so its zone does not matter).
  const capturedMs = rows.map((r) => {
    const m = /^(\d{4})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{3})$/.exec(r[col.get("timestamp")]);
    return Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6], +m[7]);
  });
  const row = (k) => (from + k) % rows.length;
  /** When row k is due, in ms after the first row served. */
  const dueMs = (k) => (capturePace ? capturedMs[row(k)] - capturedMs[row(0)] : k * periodMs);

  function rowLine(k, t0) {
    const r = rows[row(k)];
    return canon
      .map((c) => {
        if (c === "timestamp") return stamp(capturePace ? new Date(t0 + dueMs(k)) : new Date());
        if (c in fromQ && !col.has(c)) return fromQ[c];
        const v = r[col.get(c)];
        return nounits ? v.replace(/ (W|%|MHz|MiB)$/, "") : v;
      })
      .join(", ");
  }

  if (process.env.REPLAY_GRANDCHILD_PIDFILE) {
    const g = spawn("sleep", ["60"], { stdio: "ignore" }); // same process group as us
    writeFileSync(process.env.REPLAY_GRANDCHILD_PIDFILE, String(g.pid));
  }

  if (!noheader) process.stdout.write(`${headerLine()}\n`);
  if (periodMs === null) {
    process.stdout.write(`${rowLine(0, Date.now())}\n`);
    process.exit(0);
  }
  if (capturePace && from + count > rows.length) {
    process.stderr.write(
      "replay-nvidia-smi: REPLAY_PACE=capture needs REPLAY_FROM + REPLAY_COUNT within the capture\n",
    );
    process.exit(99);
  }
  const exitAfter = process.env.REPLAY_EXIT_AFTER ? Number(process.env.REPLAY_EXIT_AFTER) : Infinity;
  const malformedAt = process.env.REPLAY_MALFORMED_AT ? Number(process.env.REPLAY_MALFORMED_AT) : -1;
  const t0 = Date.now();
  let k = 0;
  function next() {
    if (k >= exitAfter) {
      process.stderr.write("replay-nvidia-smi: REPLAY_EXIT_AFTER reached, exiting as a failing tool would\n");
      process.exit(1);
    }
    if (k >= count) {
      // Silent but alive, as nvidia-smi's loop is until it is stopped.
      setInterval(() => {}, 60_000);
      return;
    }
    const line = rowLine(k, t0);
    // The cut half-row goes out in the same write as the last whole one: it is there once that row is.
    const cut = k === count - 1 && process.env.REPLAY_CUT_LAST ? rowLine(k + 1, t0).slice(0, line.length >> 1) : "";
    process.stdout.write(k === malformedAt ? `${line.slice(0, 30)}\n` : `${line}\n${cut}`);
    k++;
    setTimeout(next, Math.max(0, t0 + dueMs(k) - Date.now()));
  }
  next();
}
