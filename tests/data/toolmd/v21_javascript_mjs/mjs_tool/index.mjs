export async function execute(toolCallId, params, signal, onUpdate) {
  return { content: [{ type: 'text', text: 'ok' }] };
}
