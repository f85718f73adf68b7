/** Where a peer keeps its files: the user's app-data folder unless --data-dir or AGENTJET_DATA_DIR says otherwise. */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env, platform = process.platform): string {
  if (env.AGENTJET_DATA_DIR) return resolve(env.AGENTJET_DATA_DIR);
  if (platform === 'win32') return join(env.APPDATA ?? join(homedir(), 'AppData', 'Roaming'), 'AgentJet');
  if (platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'AgentJet');
  return join(env.XDG_DATA_HOME ?? join(homedir(), '.local', 'share'), 'agentjet');
}

/** Files inside a data directory, named once. */
export function dataPaths(dataDir: string) {
  return {
    dataDir,
    identity: join(dataDir, 'identity.json'),
    store: join(dataDir, 'agentjet.sqlite'),
    control: join(dataDir, 'control.json'),
    logs: join(dataDir, 'logs'),
    checkpoints: join(dataDir, 'checkpoints'),
    scripts: join(dataDir, 'scripts'),
    p2p: join(dataDir, 'p2p'),
  };
}
export type DataPaths = ReturnType<typeof dataPaths>;

/** A study's folder (its runs' data dirs, task files, report): `<dataDir>/studies/<id>`. */
export function studyDir(dataDir: string, studyId: string): string {
  return join(dataDir, 'studies', studyId.replace(/[^A-Za-z0-9._-]/g, '_'));
}
