// Headless Chromium for the report tests: the system's browser through playwright-core.
import type { Browser, Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

/** Launches /usr/bin/chromium headless, sandbox and GPU off, no background network traffic. */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import("playwright-core");
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}

/** A 1200 × 900 page. */
export function reportPage(browser: Browser): Promise<Page> {
  return browser.newPage({ viewport: { width: 1200, height: 900 } });
}
