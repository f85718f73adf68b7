/**
 * Our WGSL kernels for tfjs's webgpu backend, installed once per thread by worker/backend.ts after it loads
 * tfjs-backend-webgpu and before the backend is first initialised:
 * - the backend's device is created with shader-f16 and subgroups where offered (device.ts);
 * - BatchMatMul is ours (matmul.ts), tfjs's kept as the fallback; AGENTJET_WEBGPU_MATMUL picks the variant; and
 *   the same product with an added residual or bias in its stores (matmul-add.ts), for decoding;
 * - RMSNorm, RoPE and SwiGLU are new kernels (AgentJet*), reached through the ops in rms-norm.ts, rope.ts and
 *   swiglu.ts (which take tf's composition on other backends);
 * - RMSNorm fused into the products that read it, and SwiGLU into its gate/up product (fused-matmul.ts), used where
 *   fused-calibration.ts measured them faster; AGENTJET_WEBGPU_FUSED (auto, on, off) forces the choice;
 * - causal attention, forward and gradient, is a pair of new kernels (attention.ts), which worker/causal-attention.ts
 *   runs for causal and tree-packed samples alike;
 * - the paged KV cache's append (paged-kv-cache.ts) and decode attention over it (paged-attention.ts), which
 *   worker/tensor-decode.ts's paged decoding runs;
 * - token sampling (sample.ts), which a decode step on the device runs so that it reads back a token and a logprob
 *   per sequence instead of its logits.
 */
import { registerAttention } from './attention.ts';
import { type FusedMode, registerFusedMatmuls, setFusedKernels } from './fused-matmul.ts';
import { registerWebGpuBackendWithFeatures } from './device.ts';
import { type MatmulKernel, registerMatmul, registerMatmulAdd, setMatmulKernel } from './matmul.ts';
import { registerPagedAttention } from './paged-attention.ts';
import { registerPagedAppend } from './paged-kv-cache.ts';
import { registerRmsNorm } from './rms-norm.ts';
import { registerRope } from './rope.ts';
import { registerSample } from './sample.ts';
import { registerSwiglu } from './swiglu.ts';

let installed = false;

export async function installWebGpuKernels(): Promise<void> {
  if (installed) return;
  const env = process.env.AGENTJET_WEBGPU_MATMUL;
  if (env) setMatmulKernel(env as MatmulKernel); // an unknown name fails the backend's registration, with the reason
  const fused = process.env.AGENTJET_WEBGPU_FUSED;
  if (fused) setFusedKernels(fused as FusedMode); // likewise
  await registerWebGpuBackendWithFeatures();
  registerMatmul();
  registerMatmulAdd();
  registerRmsNorm();
  registerRope();
  registerSwiglu();
  registerFusedMatmuls();
  registerAttention();
  registerPagedAppend();
  registerPagedAttention();
  registerSample();
  installed = true;
}
