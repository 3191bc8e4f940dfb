// A starting point for a TypeScript tool (Node.js 24 strips the types: use erasable
// syntax only, no enums or namespaces). It takes `steps` steps, reports progress after
// each through onUpdate, and stops as soon as the run's AbortSignal fires.

type TextContent = { type: 'text'; text: string };
type ToolResult = { content: TextContent[]; isError: boolean };
type OnUpdate = (update: { content: TextContent[] }) => void;

const STEP_MS = 500;

function result(text: string, isError = false): ToolResult {
  return { content: [{ type: 'text', text }], isError };
}

// Resolves after `ms`, or rejects as soon as `signal` aborts (a cancelled run).
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new Error('cancelled'));
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Error('cancelled'));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export async function execute(
  toolCallId: string,
  params: Record<string, unknown>,
  signal?: AbortSignal,
  onUpdate?: OnUpdate,
): Promise<ToolResult> {
  const message = typeof params?.message === 'string' ? params.message.trim() : '';
  if (message === '') return result('Error: message is required', true);
  const steps = params?.steps === undefined || params?.steps === null ? 3 : Number(params.steps);
  if (!Number.isInteger(steps) || steps < 1 || steps > 10) {
    return result('Error: steps must be an integer from 1 to 10', true);
  }

  for (let step = 1; step <= steps; step++) {
    try {
      await sleep(STEP_MS, signal);
    } catch {
      return result('cancelled', true);
    }
    onUpdate?.({ content: [{ type: 'text', text: `step ${step} of ${steps}` }] });
  }
  return result(`${message} (after ${steps} steps)`);
}
