/**
 * x · w + addend in one dispatch on webgpu (matmul.ts's MATMUL_ADD_KERNEL: the addend is read in the product's
 * stores), for decoding's residual adds and biases, each of which was a dispatch of its own; tf's product and add
 * elsewhere, which compute what they did before.
 */
import * as tf from '@tensorflow/tfjs';
import { ourKernelRuns } from './gpu.ts';
import { MATMUL_ADD_KERNEL, MatmulAddendShapeError } from './matmul.ts';

type CustomGradientFunc = Parameters<typeof tf.customGrad>[0];

/** x [m, k] · w [k, n] + addend, a residual [m, n] or a bias [n] (MatmulAddendShapeError for another shape). */
export function matMulPlus(x: tf.Tensor2D, w: tf.Tensor2D, addend: tf.Tensor): tf.Tensor2D {
  const [m] = x.shape;
  const n = w.shape[1];
  const kind = addend.rank === 1 ? 'columns' : 'rows';
  if (kind === 'columns' ? addend.shape[0] !== n : !tf.util.arraysEqual(addend.shape, [m, n])) {
    throw new MatmulAddendShapeError(`an addend [${addend.shape}] for a product [${m}, ${n}]: it must be [${m}, ${n}] or [${n}]`);
  }
  if (!ourKernelRuns(MATMUL_ADD_KERNEL)) return tf.add(tf.matMul(x, w), addend);
  const f = tf.customGrad(((xIn: tf.Tensor, wIn: tf.Tensor, addIn: tf.Tensor, save: tf.GradSaveFunc) => {
    save([xIn, wIn]);
    return {
      value: tf.engine().runKernel(MATMUL_ADD_KERNEL, { a: xIn, b: wIn, addend: addIn }, { addend: kind }) as tf.Tensor,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, ws] = saved as tf.Tensor2D[];
        const d = dy as tf.Tensor2D;
        return [tf.matMul(d, ws, false, true), tf.matMul(xs, d, true, false), kind === 'rows' ? d : tf.sum(d, 0)];
      },
    };
  }) as unknown as CustomGradientFunc);
  return f(x, w, addend) as tf.Tensor2D;
}
