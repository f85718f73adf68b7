/**
 * Works around a memory bug in `xsalsa20` 1.2 (the cipher under @libp2p/pnet): all ciphers share one wasm
 * memory, and when one cipher grows it, the others keep a view of the old, detached buffer (length 0). Their
 * next update then grows the memory again by the full input size, so two long-lived ciphers (a connection's
 * inbound and outbound) keep growing it until "WebAssembly.Memory.grow(): Maximum memory size exceeded" kills
 * the connection — after some tens of MB through a private swarm. Refreshing a detached view before each
 * update (`realloc` with a zero-page grow re-reads the buffer) removes the runaway growth.
 */
import { createRequire } from 'node:module';

interface WasmCipher {
  _memory: Uint8Array;
  realloc(size: number): void;
  update(input: Uint8Array, output: Uint8Array): void;
}

type XSalsa20Factory = (nonce: Uint8Array, key: Uint8Array) => { _xor: WasmCipher | object };

const PATCHED = Symbol.for('agentjet.xsalsa20-fix');

function patchXSalsa20(): void {
  const xsalsa20 = createRequire(import.meta.url)('xsalsa20') as XSalsa20Factory;
  const probe = xsalsa20(new Uint8Array(24), new Uint8Array(32))._xor;
  // Without WebAssembly the library uses a pure-JS fallback that has no shared memory (nothing to fix).
  if (!('realloc' in probe)) return;
  const proto = Object.getPrototypeOf(probe) as WasmCipher & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const update = proto.update;
  proto.update = function updateWithFreshView(this: WasmCipher, input: Uint8Array, output: Uint8Array) {
    if (this._memory.length === 0) this.realloc(0);
    return update.call(this, input, output);
  };
  proto[PATCHED] = true;
}

patchXSalsa20();

export {};
