// The store's redactor is the project's one (src/secrets.ts): every JSON value and log line passes here.
export { addSecret, REDACTED, redact, redactString } from "../secrets.ts";
