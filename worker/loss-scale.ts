/**
 * Dynamic loss scaling for mixed-precision training (Micikevicius et al. 2018): the loss is multiplied by a power of
 * two before the backward pass so that small gradients survive being rounded to f16 inside the products (f16's
 * smallest normal is 6.1e-5, its smallest subnormal 6e-8), and the summed f32 gradients are divided by it again (a
 * power of two: exactly). A step whose unscaled gradients are not finite (a scaled value went past f16's 65504) is
 * skipped, optimizer state untouched, and the scale halved; after LOSS_SCALE_GROWTH_INTERVAL good steps in a row it
 * doubles, so that it stays near the largest scale that does not overflow.
 */

/** Starting scale: 2¹⁵ keeps a cross-entropy gradient of a few thousand tokens (each ~1/N) well inside f16's normal range and far below its overflow. */
export const INITIAL_LOSS_SCALE = 2 ** 15;
/** Good steps in a row before the scale doubles: PyTorch's GradScaler waits 2000, but an RL run takes hundreds of steps, so the scale must recover within one. */
export const LOSS_SCALE_GROWTH_INTERVAL = 200;
/** The scale never goes below 1 (below it, scaling would only lose range) nor above 2²⁴ (there any gradient over 65504 / 2²⁴ ≈ 3.9e-3 overflows). */
export const MIN_LOSS_SCALE = 1;
export const MAX_LOSS_SCALE = 2 ** 24;

export class InvalidLossScaleError extends Error {
  override name = 'InvalidLossScaleError';
}

/** The scaler's verdict on one step's gradients. */
export interface LossScaleUpdate {
  /** The scale this step's loss was multiplied by. */
  scale: number;
  /** The step was skipped: its gradients were not finite. */
  skipped: boolean;
}

export class LossScaler {
  private current: number;
  private goodSteps = 0;
  /** Steps skipped since the scaler was made. */
  skippedSteps = 0;

  constructor(initial: number = INITIAL_LOSS_SCALE) {
    // A power of two in range: dividing the gradients by it is then exact.
    if (!(initial >= MIN_LOSS_SCALE && initial <= MAX_LOSS_SCALE) || !Number.isInteger(Math.log2(initial))) {
      throw new InvalidLossScaleError(`the loss scale must be a power of two in [${MIN_LOSS_SCALE}, ${MAX_LOSS_SCALE}], got ${initial}`);
    }
    this.current = initial;
  }

  get scale(): number {
    return this.current;
  }

  /** Record a step's outcome (`finite`: its unscaled gradients were) and adjust the scale for the next one. */
  update(finite: boolean): LossScaleUpdate {
    const scale = this.current;
    if (!finite) {
      this.current = Math.max(MIN_LOSS_SCALE, scale / 2);
      this.goodSteps = 0;
      this.skippedSteps++;
      return { scale, skipped: true };
    }
    this.goodSteps++;
    if (this.goodSteps >= LOSS_SCALE_GROWTH_INTERVAL) {
      this.current = Math.min(MAX_LOSS_SCALE, scale * 2);
      this.goodSteps = 0;
    }
    return { scale, skipped: false };
  }
}
