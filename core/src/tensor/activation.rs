//! Activation functions composed from elementwise math: `silu softplus elu leaky_relu
//! hardswish mish relu6 hardsigmoid hardtanh celu selu`, and `clip` (an alias of `clamp`).
//! Each is a handful of differentiable primitives, so gradients come for free.

use super::Tensor;

/// SELU's fixed scale α (Klambauer et al.).
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
/// SELU's fixed output scale λ.
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

impl Tensor {
    /// `x·sigmoid(x)` (also called swish).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let y = Tensor::from_slice(&[0.0f32, 2.0], &[2]).silu().to_vec::<f32>().unwrap();
    /// assert!(y[0] == 0.0 && (y[1] - 1.761_594).abs() < 1e-5);
    /// ```
    pub fn silu(&self) -> Tensor {
        let x = self.float();
        x.mul(x.sigmoid())
    }

    /// `log(1 + e^(βx)) / β`, computed stably as `(relu(βx) + log(1 + e^-|βx|)) / β`.
    pub fn softplus(&self, beta: f64) -> Tensor {
        let bx = self.float().mul(beta);
        let tail = bx.abs().neg().exp().add(1.0).log();
        bx.relu().add(tail).div(beta)
    }

    /// `x` for `x > 0`, `α(e^x - 1)` otherwise.
    pub fn elu(&self, alpha: f64) -> Tensor {
        let x = self.float();
        x.relu().sub(x.exp().neg().add(1.0).relu().mul(alpha))
    }

    /// `x` for `x >= 0`, `slope·x` otherwise.
    pub fn leaky_relu(&self, slope: f64) -> Tensor {
        let x = self.float();
        x.lt(0.0).where_(x.mul(slope), &x)
    }

    /// `min(max(x, 0), 6)`, as `relu(x) - relu(x - 6)`.
    pub fn relu6(&self) -> Tensor {
        let x = self.float();
        x.relu().sub(x.sub(6.0).relu())
    }

    /// `x·relu6(x + 3)/6`.
    pub fn hardswish(&self) -> Tensor {
        let x = self.float();
        x.mul(x.add(3.0).relu6()).div(6.0)
    }

    /// `clamp(αx + β, 0, 1)`, as `relu(αx + β) - relu(αx + β - 1)` (tinygrad's defaults are
    /// `α = 1/6`, `β = 0.5`).
    pub fn hardsigmoid(&self, alpha: f64, beta: f64) -> Tensor {
        let y = self.float().mul(alpha).add(beta);
        y.relu().sub(y.sub(1.0).relu())
    }

    /// `clamp(x, min, max)`.
    pub fn hardtanh(&self, min: f64, max: f64) -> Tensor {
        self.float().clamp(Some(min), Some(max))
    }

    /// `x·tanh(softplus(x))`.
    pub fn mish(&self) -> Tensor {
        let x = self.float();
        x.mul(x.softplus(1.0).tanh())
    }

    /// `max(0, x) + min(0, α(e^(x/α) - 1))`.
    pub fn celu(&self, alpha: f64) -> Tensor {
        let x = self.float();
        let neg = x.div(alpha).exp().sub(1.0).mul(alpha).minimum(0.0);
        x.relu().add(neg)
    }

    /// `λ·x` for `x >= 0`, `λα(e^x - 1)` otherwise, with SELU's fixed α and λ.
    pub fn selu(&self) -> Tensor {
        let x = self.float();
        let neg = x.exp().sub(1.0).mul(SELU_ALPHA);
        x.ge(0.0).where_(&x, neg).mul(SELU_SCALE)
    }

    /// Alias of [`Tensor::clamp`].
    pub fn clip(&self, min: Option<f64>, max: Option<f64>) -> Tensor {
        self.clamp(min, max)
    }
}
