// A test tool (tests/runs/test_run_progress.py, tests/browser/test_browser_run_progress.py): progress
// 1..N of total N, one update per step, as onUpdate's contract (docs/tool-format.md) says.
export async function execute(toolCallId: string, params: any, signal: AbortSignal,
                              onUpdate: (u: any) => void) {
  const steps: number = params.steps ?? 5;
  const delay: number = params.delay_ms ?? 300;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  for (let i = 1; i <= steps; i++) {
    if (signal.aborted) {
      return { content: [{ type: "text", text: `stopped at step ${i}` }], isError: true };
    }
    onUpdate({ content: [{ type: "text", text: `step ${i} of ${steps}` }], progress: i, total: steps });
    await sleep(delay);
  }
  return { content: [{ type: "text", text: `counted to ${steps}` }] };
}
