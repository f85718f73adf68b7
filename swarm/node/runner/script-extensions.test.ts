/** The one list of script extensions (swarm/common/script-extensions.ts) and what the runner makes of it. */
import { describe, expect, it } from 'vitest';
import { attachClientSchema } from '../../common/runner-api.ts';
import { SCRIPT_EXTENSIONS, runtimeForExtension, stripScriptExtension } from '../../common/script-extensions.ts';
import { resolveRuntime } from './script.ts';

describe('script extensions', () => {
  it('pick the runtime, in the runner and in the upload schema alike', () => {
    for (const ext of SCRIPT_EXTENSIONS) {
      const filename = `agent${ext}`;
      expect(resolveRuntime(filename, 'auto')).toBe(ext === '.py' ? 'python' : 'node');
      const upload = attachClientSchema.safeParse({ name: 'a', script: { content: 'x', filename }, tasks: { inline: [{ id: 1 }] }, model: 'm' });
      expect(upload.success).toBe(true);
    }
    expect(runtimeForExtension('AGENT.PY')).toBe('python');
    expect(() => resolveRuntime('agent.rb', 'auto')).toThrow(expect.objectContaining({ name: 'ScriptAttachError' }));
    const rb = attachClientSchema.safeParse({ name: 'a', script: { content: 'x', filename: 'agent.rb' }, tasks: { inline: [{ id: 1 }] }, model: 'm' });
    expect(rb.success).toBe(false);
    const nested = attachClientSchema.safeParse({ name: 'a', script: { content: 'x', filename: 'dir/agent.py' }, tasks: { inline: [{ id: 1 }] }, model: 'm' });
    expect(nested.success).toBe(false);
  });

  it('name a client after its file without the script extension only', () => {
    expect(stripScriptExtension('folder/my agent.v2.py')).toBe('my agent.v2');
    expect(stripScriptExtension('C:\\agents\\x.MTS')).toBe('x');
    expect(stripScriptExtension('notes.txt')).toBe('notes.txt');
    expect(stripScriptExtension('.py')).toBe('');
  });
});
