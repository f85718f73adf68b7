import { describe, expect, it } from 'vitest';
import { scriptAtPath } from './read-dropped.ts';

describe('scriptAtPath', () => {
  it('names a script chosen in the desktop shell by its file name, on POSIX and Windows paths', () => {
    expect(scriptAtPath('/home/ana/agents/calc.ts')).toEqual({ filename: 'calc.ts', path: '/home/ana/agents/calc.ts' });
    expect(scriptAtPath('C:\\Users\\ana\\agent.py')).toEqual({ filename: 'agent.py', path: 'C:\\Users\\ana\\agent.py' });
  });
});
