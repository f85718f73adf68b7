/**
 * Test helper: speak to a protocol with raw frames, the way a buggy or hostile peer would, and collect the
 * frames it answers with until it closes or aborts the stream.
 */
import type { Libp2p, PeerId } from '@libp2p/interface';
import { FrameDecoder, encodeFrame } from '../../framing/frames.ts';

export interface RawExchangeResult {
  frames: unknown[];
  /** The stream ended with an error (reset/abort) rather than a clean close. */
  aborted: boolean;
}

export async function rawExchange(libp2p: Pick<Libp2p, 'dialProtocol'>, peer: PeerId, protocol: string, payloads: Uint8Array[], options: { framed?: boolean } = {}): Promise<RawExchangeResult> {
  const stream = await libp2p.dialProtocol(peer, protocol, { signal: AbortSignal.timeout(10_000) });
  for (const payload of payloads) stream.send(options.framed === false ? payload : encodeFrame(payload));
  await stream.close().catch(() => undefined);
  const decoder = new FrameDecoder(64 * 1024 * 1024);
  const frames: unknown[] = [];
  let aborted = false;
  try {
    for await (const chunk of stream) {
      decoder.push(chunk instanceof Uint8Array ? chunk : chunk.subarray());
      for (let frame = decoder.next(); frame; frame = decoder.next()) {
        try {
          frames.push(JSON.parse(new TextDecoder().decode(frame)));
        } catch {
          frames.push(frame);
        }
      }
    }
  } catch {
    aborted = true;
  }
  return { frames, aborted };
}

export const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
