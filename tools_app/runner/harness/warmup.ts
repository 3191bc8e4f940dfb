// Imported by harness.mjs --standby so that the type stripper is loaded before the run.
export const ready: boolean = true;
