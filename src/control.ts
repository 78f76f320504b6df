// Text from servers (model ids, error bodies, labels, log lines) is inert in every output: C0
// controls but tab and newline, DEL and C1 controls are written visibly (`\x1b`), so `cat report.md`
// or a terminal cannot be cleared, retitled or spoofed. JSON escapes them by itself (`\u001b`).

// C0 controls but tab and newline, DEL, and C1 controls (0x9b is a one-byte CSI on some terminals).
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
const HAS_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

export function hasControl(s: string): boolean {
  return HAS_CONTROL.test(s);
}

/** Control characters written visibly (`\x1b`); tab and newline kept. */
export function escapeControl(s: string): string {
  return HAS_CONTROL.test(s) ? s.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`) : s;
}

// Our own colours (picocolors on a TTY) are SGR sequences, ESC [ params m; nothing else passes.
const CONTROL_BUT_SGR = /\u001b\[[0-9;]*m|[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** escapeControl for rendered terminal text: colour sequences (ESC [ … m) kept, every other control made visible. */
export function escapeControlKeepColor(s: string): string {
  return HAS_CONTROL.test(s)
    ? s.replace(CONTROL_BUT_SGR, (c) => (c.length > 1 ? c : `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`))
    : s;
}
