// The run store: every bench, ab, sweep and study, saved to SQLite as it happens (WAL; a process
// killed mid-run leaves a readable database whose run is marked partial on the next open).
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { homedir, hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { InferscopeError, InputError, UsageError } from "../errors.ts";
import { processStart, sameProcessAlive } from "../process-id.ts";
import { exportTables, REQUEST_COLUMNS, tableToCsv } from "./export.ts";
import { redact, redactString } from "./redact.ts";
import { MIGRATIONS, SCHEMA_VERSION } from "./schema.ts";
import { openDatabase, type SqlDatabase, type SqliteDriverName, sqliteErrorCode } from "./sqlite.ts";

export type RunStatus = "running" | "complete" | "partial" | "failed";
export type BlockStatus = "running" | "complete" | "failed" | "discarded";

export interface RunRecord {
  id: string;
  kind: string;
  status: RunStatus;
  config: Record<string, unknown>;
  environment: Record<string, unknown>;
  createdAt: string;
  finishedAt: string | null;
  error: string | null;
  pid: number | null;
  host: string | null;
  /** The writer's start where the platform gives it (src/process-id.ts): tells a reused pid apart. */
  pidStart: string | null;
}

export interface BlockRecord {
  id: number;
  runId: string;
  index: number;
  variant: string;
  status: BlockStatus;
  startedAt: string;
  finishedAt: string | null;
  server: Record<string, unknown> | null;
  summary: Record<string, unknown> | null;
  error: string | null;
}

/** One request as the store keeps it: the key numbers as columns, the rest (chunk times …) as JSON. */
export interface StoredRequest {
  index: number;
  ok: boolean;
  ttftMs: number | null;
  e2elMs: number | null;
  tpotMs: number | null;
  outputTokens: number | null;
  promptTokens: number | null;
  error?: string | null;
  data?: Record<string, unknown>;
}

export interface StoredTelemetry {
  /** The source as resolved ("nvidia-smi", "dcgm http://…/metrics"). */
  source: string;
  summary: Record<string, unknown>;
  samples: readonly Record<string, unknown>[];
}

export interface RunDetail {
  run: RunRecord;
  blocks: BlockRecord[];
  summaries: Record<string, unknown>;
  requestCount: number;
}

export interface Store {
  readonly path: string;
  /** The SQLite driver under it: node:sqlite, or better-sqlite3 where Node has none. */
  readonly driver: SqliteDriverName;
  saveRun(r: {
    kind: string;
    config: Record<string, unknown>;
    environment?: Record<string, unknown>;
    id?: string;
    status?: RunStatus;
  }): RunRecord;
  updateRun(
    id: string,
    patch: Partial<Pick<RunRecord, "status" | "config" | "environment" | "finishedAt" | "error">>,
  ): void;
  /** Marks a run finished with the given status (complete by default), now. */
  finishRun(id: string, status?: RunStatus, error?: string | null): void;
  addBlock(
    runId: string,
    b: {
      index: number;
      variant: string;
      status?: BlockStatus;
      server?: Record<string, unknown> | null;
      summary?: Record<string, unknown> | null;
    },
  ): number;
  updateBlock(
    blockId: number,
    patch: Partial<Pick<BlockRecord, "status" | "finishedAt" | "server" | "summary" | "error">>,
  ): void;
  addRequests(runId: string, blockId: number | null, records: readonly StoredRequest[]): void;
  setSummary(runId: string, key: string, value: unknown): void;
  /** Hardware telemetry over a run's (or a block's) measured window: its summary and samples. */
  addTelemetry(runId: string, blockId: number | null, t: StoredTelemetry): number;
  getTelemetry(runId: string, opts?: { blockId?: number }): Array<StoredTelemetry & { blockId: number | null }>;
  getRun(id: string): RunDetail;
  getRequests(runId: string, opts?: { blockId?: number }): Array<StoredRequest & { blockId: number | null }>;
  listRuns(opts?: { kind?: string; limit?: number }): RunRecord[];
  exportRun(id: string, format: "json" | "csv"): string;
  close(): void;
}

/** ~/.inferscope/runs.db unless INFERSCOPE_DB says otherwise. */
export function defaultDbPath(): string {
  return process.env.INFERSCOPE_DB || join(homedir(), ".inferscope", "runs.db");
}

export function newRunId(kind: string, now = new Date()): string {
  const ts = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "");
  return `${kind}-${ts}-${randomBytes(2).toString("hex")}`;
}

const json = (v: unknown) => JSON.stringify(redact(v ?? null));
const parse = <T>(s: string | null): T | null => (s == null ? null : (JSON.parse(s) as T));

/**
 * Brings a database to the current schema, one transaction per migration. Each takes the write lock
 * first (BEGIN IMMEDIATE, waiting up to busy_timeout) and reads the version under it, so processes
 * opening one new store at once apply each migration once: the others find it applied.
 */
export function migrate(db: SqlDatabase, target = SCHEMA_VERSION): number {
  const version = () => db.pragma("user_version", { simple: true }) as number;
  const check = (v: number) => {
    if (v > SCHEMA_VERSION)
      throw new InputError(
        `run store schema version ${v} is newer than this inferscope understands (${SCHEMA_VERSION})`,
        { hint: "upgrade inferscope, or use another --db" },
      );
  };
  // Up to date: no write lock, so a store another process is writing opens at once.
  check(version());
  for (let step = 0; step < target && version() < target; step++)
    db.transaction(() => {
      const v = version();
      check(v);
      if (v >= target) return;
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    }).immediate();
  return version();
}

/**
 * The switch to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once (no busy handler)
 * when another connection holds the file while it switches: several processes opening one new store
 * together hit this. Retried with a short jittered pause until busy_timeout's 5 s have passed.
 */
function switchToWal(db: SqlDatabase, budgetMs = 5000): void {
  const deadline = Date.now() + budgetMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      if (String(db.pragma("journal_mode", { simple: true })).toLowerCase() === "wal") return;
      db.pragma("journal_mode = WAL");
      return;
    } catch (err) {
      if (sqliteErrorCode(err) !== "SQLITE_BUSY" || Date.now() >= deadline) throw err;
      Atomics.wait(pause, 0, 0, 5 + Math.random() * 20); // synchronous: openStore is synchronous for its callers
    }
  }
}

export function openStore(path: string = defaultDbPath()): Store {
  const file = resolve(path);
  let db: SqlDatabase;
  try {
    mkdirSync(dirname(file), { recursive: true });
    db = openDatabase(file);
    // First: every step after it (the switch to WAL, the schema) waits for another process's lock.
    db.pragma("busy_timeout = 5000");
    switchToWal(db);
    // In WAL mode NORMAL survives a killed process (not a power cut), at a fraction of FULL's cost.
    db.pragma("synchronous = NORMAL");
    db.pragma("foreign_keys = ON");
    migrate(db);
  } catch (err) {
    if (err instanceof InferscopeError) throw err;
    throw new InputError(`cannot open run store ${file}: ${(err as Error).message}`, { cause: err });
  }
  const host = hostname();
  const start = processStart(process.pid);

  // A run left 'running' by a process that no longer exists was killed: keep its data, mark it partial.
  const stale = db.prepare("SELECT id, pid, host, pid_start FROM runs WHERE status = 'running'").all() as Array<{
    id: string;
    pid: number | null;
    host: string | null;
    pid_start: string | null;
  }>;
  for (const r of stale) {
    if (r.host === host && r.pid != null && r.pid !== process.pid && !sameProcessAlive(r.pid, r.pid_start)) {
      db.transaction(() => {
        db.prepare(
          "UPDATE runs SET status = 'partial', error = coalesce(error, 'writer process ended without finishing the run') WHERE id = ?",
        ).run(r.id);
        db.prepare(
          "UPDATE blocks SET status = 'failed', error = coalesce(error, 'interrupted') WHERE run_id = ? AND status = 'running'",
        ).run(r.id);
      })();
    }
  }

  const rowToRun = (r: any): RunRecord => ({
    id: r.id,
    kind: r.kind,
    status: r.status,
    config: parse(r.config) ?? {},
    environment: parse(r.environment) ?? {},
    createdAt: r.created_at,
    finishedAt: r.finished_at,
    error: r.error ?? null,
    pid: r.pid ?? null,
    host: r.host ?? null,
    pidStart: r.pid_start ?? null,
  });
  const rowToBlock = (r: any): BlockRecord => ({
    id: r.id,
    runId: r.run_id,
    index: r.idx,
    variant: r.variant,
    status: r.status,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    server: parse(r.server),
    summary: parse(r.summary),
    error: r.error,
  });

  const insRequest = db.prepare(
    `INSERT INTO requests (run_id, block_id, idx, ok, ttft_ms, e2el_ms, tpot_ms, output_tokens, prompt_tokens, error, data)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const addRequestsTx = db.transaction((runId: string, blockId: number | null, recs: readonly StoredRequest[]) => {
    for (const r of recs)
      insRequest.run(
        runId,
        blockId,
        r.index,
        r.ok ? 1 : 0,
        num(r.ttftMs),
        num(r.e2elMs),
        num(r.tpotMs),
        num(r.outputTokens),
        num(r.promptTokens),
        r.error ? redact(r.error) : null,
        r.data ? json(r.data) : null,
      );
  });

  const getRunRow = (id: string) => {
    const row = db.prepare("SELECT * FROM runs WHERE id = ?").get(id);
    if (!row) {
      // Allow a unique prefix, as git does.
      const rows = db.prepare("SELECT * FROM runs WHERE id LIKE ? || '%' LIMIT 2").all(id);
      if (rows.length === 1) return rows[0];
      throw new UsageError(rows.length ? `run id "${id}" is ambiguous` : `no run "${id}" in ${file}`, {
        hint: "list runs with: inferscope runs list",
      });
    }
    return row;
  };

  const store: Store = {
    path: file,
    driver: db.driver,
    saveRun({ kind, config, environment, id, status }) {
      const rid = id ?? newRunId(kind);
      const createdAt = new Date().toISOString();
      db.prepare(
        "INSERT INTO runs (id, kind, status, config, environment, created_at, pid, host, pid_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
      ).run(rid, kind, status ?? "running", json(config), json(environment ?? {}), createdAt, process.pid, host, start);
      return rowToRun(db.prepare("SELECT * FROM runs WHERE id = ?").get(rid));
    },
    updateRun(id, patch) {
      const u = new Update();
      if (patch.status) u.set("status", patch.status);
      if (patch.config) u.set("config", json(patch.config));
      if (patch.environment) u.set("environment", json(patch.environment));
      if (patch.finishedAt !== undefined) u.set("finished_at", patch.finishedAt);
      if (patch.error !== undefined) u.set("error", patch.error == null ? null : redact(patch.error));
      if (patch.status === "running") u.set("pid", process.pid).set("host", host).set("pid_start", start);
      u.run(db, "runs", id);
    },
    finishRun(id, status = "complete", error = null) {
      store.updateRun(id, { status, finishedAt: new Date().toISOString(), error });
    },
    addBlock(runId, b) {
      const r = db
        .prepare(
          "INSERT INTO blocks (run_id, idx, variant, status, started_at, server, summary) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .run(
          runId,
          b.index,
          b.variant,
          b.status ?? "running",
          new Date().toISOString(),
          b.server ? json(b.server) : null,
          b.summary ? json(b.summary) : null,
        );
      return Number(r.lastInsertRowid);
    },
    updateBlock(blockId, patch) {
      const u = new Update();
      if (patch.status) u.set("status", patch.status);
      if (patch.finishedAt !== undefined) u.set("finished_at", patch.finishedAt);
      if (patch.server !== undefined) u.set("server", patch.server ? json(patch.server) : null);
      if (patch.summary !== undefined) u.set("summary", patch.summary ? json(patch.summary) : null);
      if (patch.error !== undefined) u.set("error", patch.error == null ? null : redact(patch.error));
      u.run(db, "blocks", blockId);
    },
    addRequests(runId, blockId, records) {
      addRequestsTx(runId, blockId, records);
    },
    setSummary(runId, key, value) {
      db.prepare(
        "INSERT INTO summaries (run_id, key, value) VALUES (?, ?, ?) ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value",
      ).run(runId, key, json(value));
    },
    addTelemetry(runId, blockId, t) {
      const info = db
        .prepare("INSERT INTO telemetry (run_id, block_id, source, summary, samples) VALUES (?, ?, ?, ?, ?)")
        .run(runId, blockId, redactString(t.source), json(t.summary), JSON.stringify(t.samples));
      return Number(info.lastInsertRowid);
    },
    getTelemetry(runId, opts = {}) {
      const rows = (
        opts.blockId == null
          ? db.prepare("SELECT * FROM telemetry WHERE run_id = ? ORDER BY block_id, id").all(runId)
          : db.prepare("SELECT * FROM telemetry WHERE run_id = ? AND block_id = ? ORDER BY id").all(runId, opts.blockId)
      ) as any[];
      return rows.map((r) => ({
        blockId: r.block_id,
        source: r.source,
        summary: JSON.parse(r.summary),
        samples: JSON.parse(r.samples),
      }));
    },
    getRun(id) {
      const run = rowToRun(getRunRow(id));
      const blocks = (db.prepare("SELECT * FROM blocks WHERE run_id = ? ORDER BY idx, id").all(run.id) as any[]).map(
        rowToBlock,
      );
      const summaries: Record<string, unknown> = {};
      for (const s of db.prepare("SELECT key, value FROM summaries WHERE run_id = ? ORDER BY key").all(run.id) as any[])
        summaries[s.key] = JSON.parse(s.value);
      const { n } = db.prepare("SELECT count(*) AS n FROM requests WHERE run_id = ?").get(run.id) as { n: number };
      return { run, blocks, summaries, requestCount: n };
    },
    getRequests(runId, opts = {}) {
      const rows = (
        opts.blockId == null
          ? db.prepare("SELECT * FROM requests WHERE run_id = ? ORDER BY block_id, idx").all(runId)
          : db.prepare("SELECT * FROM requests WHERE run_id = ? AND block_id = ? ORDER BY idx").all(runId, opts.blockId)
      ) as any[];
      return rows.map((r) => ({
        blockId: r.block_id,
        index: r.idx,
        ok: r.ok === 1,
        ttftMs: r.ttft_ms,
        e2elMs: r.e2el_ms,
        tpotMs: r.tpot_ms,
        outputTokens: r.output_tokens,
        promptTokens: r.prompt_tokens,
        error: r.error,
        data: parse<Record<string, unknown>>(r.data) ?? undefined,
      }));
    },
    listRuns(opts = {}) {
      const limit = opts.limit ?? 1000;
      const rows = opts.kind
        ? db
            .prepare("SELECT * FROM runs WHERE kind = ? ORDER BY created_at DESC, id DESC LIMIT ?")
            .all(opts.kind, limit)
        : db.prepare("SELECT * FROM runs ORDER BY created_at DESC, id DESC LIMIT ?").all(limit);
      return (rows as any[]).map(rowToRun);
    },
    exportRun(id, format) {
      const detail = store.getRun(id);
      const requests = store.getRequests(detail.run.id);
      if (format === "json") {
        const telemetry = store.getTelemetry(detail.run.id);
        return `${JSON.stringify({ ...detail, requests, ...(telemetry.length ? { telemetry } : {}) }, null, 2)}\n`;
      }
      if (format !== "csv") throw new UsageError(`unknown export format "${format}" (json or csv)`);
      return tableToCsv(REQUEST_COLUMNS, exportTables(store, id).requests);
    },
    close() {
      db.close();
    },
  };
  return store;
}

/** Collects "col = ?" assignments for one UPDATE by primary key. */
class Update {
  private cols: string[] = [];
  private vals: unknown[] = [];
  set(col: string, v: unknown): this {
    this.cols.push(`${col} = ?`);
    this.vals.push(v);
    return this;
  }
  run(db: SqlDatabase, table: "runs" | "blocks", id: string | number): void {
    if (this.cols.length) db.prepare(`UPDATE ${table} SET ${this.cols.join(", ")} WHERE id = ?`).run(...this.vals, id);
  }
}

function num(v: number | null | undefined): number | null {
  return v == null || !Number.isFinite(v) ? null : v;
}
