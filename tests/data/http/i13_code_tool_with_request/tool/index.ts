export async function execute() { return {content: []} }
