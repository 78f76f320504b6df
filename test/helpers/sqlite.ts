// Which SQLite driver a Node should give the store, from Node's own release notes (not from the code
// under test): node:sqlite without a flag from 22.13.0 and 23.4.0, better-sqlite3 before that.
export function nodeHasSqlite(version = process.versions.node): boolean {
  const [major, minor] = version.split(".").map(Number);
  return major >= 24 || (major === 23 && minor >= 4) || (major === 22 && minor >= 13);
}

export function expectedSqliteDriver(): "node:sqlite" | "better-sqlite3" {
  return nodeHasSqlite() ? "node:sqlite" : "better-sqlite3";
}
