/** Every agentjet protocol id is `/agentjet/<name>/<version>`. */
export const PROTOCOL_PREFIX = '/agentjet';

export function protocolId(name: string, version: number): string {
  return `${PROTOCOL_PREFIX}/${name}/${version}`;
}
