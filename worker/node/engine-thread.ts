/**
 * Entry point of the engine's worker thread: builds the engine on `init`, then serves the typed requests of
 * worker/common/protocol.ts one by one (generate requests run concurrently, batched by the engine).
 * Started by engine-client.ts with tsx's loader in execArgv.
 */
import { parentPort } from 'node:worker_threads';
import type { GeneratedToken } from '../common/engine.ts';
import type { EngineRequest, EngineResponse } from '../common/protocol.ts';
import { flattenError, tensorBuffers } from '../common/protocol.ts';
import type { LocalEngine } from '../engine.ts';
import { createEngine } from './load-model.ts';

const port = parentPort!;
let engine: LocalEngine | null = null;
const cancels = new Map<number, AbortController>();

class EngineNotReadyError extends Error {
  override name = 'EngineNotReadyError';
}

function send(msg: EngineResponse, transfer: ArrayBuffer[] = []): void {
  port.postMessage(msg, transfer);
}

function ready(): LocalEngine {
  if (!engine) throw new EngineNotReadyError('the engine has not been initialised');
  return engine;
}

async function handle(msg: EngineRequest): Promise<void> {
  switch (msg.type) {
    case 'init':
      engine = await createEngine(msg.options);
      return send({ id: msg.id, type: 'result', value: engine.info });
    case 'generate': {
      const ac = new AbortController();
      cancels.set(msg.id, ac);
      try {
        const onToken = msg.stream ? (token: GeneratedToken) => send({ id: msg.id, type: 'token', token }) : undefined;
        const value = await ready().generate(msg.req, onToken, ac.signal);
        return send({ id: msg.id, type: 'result', value });
      } finally {
        cancels.delete(msg.id);
      }
    }
    case 'cancel':
      cancels.get(msg.target)?.abort();
      return;
    case 'trainStep':
      return send({ id: msg.id, type: 'result', value: await ready().trainStep(msg.samples, msg.options) });
    case 'logprobs':
      return send({ id: msg.id, type: 'result', value: await ready().logprobs(msg.sequences) });
    case 'snapshotReference':
      await ready().snapshotReference();
      return send({ id: msg.id, type: 'result', value: null });
    case 'getWeights': {
      const weights = await ready().getWeights();
      return send({ id: msg.id, type: 'result', value: weights }, tensorBuffers(weights));
    }
    case 'setWeights':
      await ready().setWeights(msg.weights, msg.policyVersion);
      return send({ id: msg.id, type: 'result', value: null });
    case 'getOptimizerState': {
      const state = await ready().getOptimizerState();
      return send({ id: msg.id, type: 'result', value: state }, [...tensorBuffers(state.m), ...tensorBuffers(state.v)]);
    }
    case 'setOptimizerState':
      await ready().setOptimizerState(msg.state);
      return send({ id: msg.id, type: 'result', value: null });
    case 'save':
      return send({ id: msg.id, type: 'result', value: await ready().save(msg.dir) });
    case 'close':
      await engine?.close();
      send({ id: msg.id, type: 'result', value: null });
      port.close();
      return;
    case 'crash':
      setImmediate(() => {
        throw new Error('engine thread crashed on request (test hook)');
      });
      return;
  }
}

port.on('message', (msg: EngineRequest) => {
  handle(msg).catch((err: unknown) => send({ id: msg.id, type: 'error', error: flattenError(err) }));
});
