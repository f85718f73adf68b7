/**
 * The one IPC channel, main → page: a script chosen with File › Attach Script… (or the tray), whose path the
 * Clients view's attach form takes like a dropped file's. preload.ts cannot import this module (a sandboxed preload
 * is one file, compiled alone), so it spells the channel out; preload-build.test.ts checks the two agree.
 */
export const SCRIPT_CHOSEN_CHANNEL = 'agentjet:script-chosen';
