"""The console in Debian's Chromium through Playwright (marker: browser)."""
