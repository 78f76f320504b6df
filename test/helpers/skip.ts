// A check that cannot run here reports a skip with its reason, never a pass; in CI
// (INFERSCOPE_REQUIRE_E2E=1) a skip is a failure, as for a missing Prometheus or Chromium.
import assert from "node:assert/strict";
import type { TestContext } from "node:test";

/** Marks the test skipped with `reason`, or fails it under INFERSCOPE_REQUIRE_E2E. The caller returns after. */
export function cannotRun(t: TestContext, reason: string): void {
  if (process.env.INFERSCOPE_REQUIRE_E2E)
    assert.fail(`${reason}; INFERSCOPE_REQUIRE_E2E is set, so this check must run`);
  t.skip(reason);
}
