// Schema migrations, applied in order inside one transaction each; PRAGMA user_version is the
// version. Never edit a shipped migration: add a new one.

export const MIGRATIONS: readonly string[] = [
  // 1: runs, their blocks, and per-request records.
  `CREATE TABLE runs (
     id TEXT PRIMARY KEY,
     kind TEXT NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'partial', 'failed')),
     config TEXT NOT NULL,
     environment TEXT NOT NULL,
     created_at TEXT NOT NULL,
     finished_at TEXT
   );
   CREATE TABLE blocks (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
     idx INTEGER NOT NULL,
     variant TEXT NOT NULL,
     status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'discarded')),
     started_at TEXT NOT NULL,
     finished_at TEXT,
     server TEXT,
     summary TEXT,
     error TEXT
   );
   CREATE TABLE requests (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
     block_id INTEGER REFERENCES blocks(id) ON DELETE CASCADE,
     idx INTEGER NOT NULL,
     ok INTEGER NOT NULL,
     ttft_ms REAL,
     e2el_ms REAL,
     tpot_ms REAL,
     output_tokens INTEGER,
     prompt_tokens INTEGER,
     error TEXT,
     data TEXT
   );`,
  // 2: named summaries per run, the writer's pid/host (to tell a crashed writer from a live one), indexes.
  `CREATE TABLE summaries (
     run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
     key TEXT NOT NULL,
     value TEXT NOT NULL,
     PRIMARY KEY (run_id, key)
   );
   ALTER TABLE runs ADD COLUMN pid INTEGER;
   ALTER TABLE runs ADD COLUMN host TEXT;
   ALTER TABLE runs ADD COLUMN error TEXT;
   CREATE INDEX requests_by_run ON requests(run_id, block_id, idx);
   CREATE INDEX blocks_by_run ON blocks(run_id, idx);
   CREATE INDEX runs_by_created ON runs(created_at);`,
  // 3: hardware telemetry recorded beside a run or one of its blocks: the summary over the measured
  // window and the samples cut to it (JSON), so a report can be redrawn later.
  `CREATE TABLE telemetry (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
     block_id INTEGER REFERENCES blocks(id) ON DELETE CASCADE,
     source TEXT NOT NULL,
     summary TEXT NOT NULL,
     samples TEXT NOT NULL
   );
   CREATE INDEX telemetry_by_run ON telemetry(run_id, block_id);`,
  // 4: the writer's start (boot id / ticks since boot, where the platform gives it), so a killed writer
  // whose pid was given to another process is still told apart from a live one.
  `ALTER TABLE runs ADD COLUMN pid_start TEXT;`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;
