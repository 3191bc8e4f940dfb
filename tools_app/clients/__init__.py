"""What the console hands to agent hosts as it is: the sync client (sync-tools.mjs, Node.js,
no dependencies), served by the sync API and whose verifier block the shims embed."""

from pathlib import Path

SYNC_CLIENT = Path(__file__).with_name("sync-tools.mjs")
