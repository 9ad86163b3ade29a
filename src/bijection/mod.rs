//! Scalar bijections `f: R -> R`: the three analytic families of the paper, the
//! affine and spline baselines, and stacks of them.
//!
//! Every family is parametrized by *raw* (unconstrained) values, mapped to its
//! constrained parameters by a fixed transform (docs/mathematics.md, section 2). A family
//! exposes the map in both directions and, for training, the partial derivatives
//! of `f` and `log f'` with respect to the input and every raw parameter; the
//! reverse-mode rules of both directions ([`Scalar::x_from_z_vjp`],
//! [`Scalar::z_from_x_vjp`]) are built from those partials alone.
//!
//! This module depends on nothing else of the crate but [`crate::real`].

pub mod affine;
pub mod cubic;
pub mod cubic_rational;
pub mod error;
pub mod lanes;
pub mod sinh;
pub mod spline;
pub mod stack;

use crate::real::{Real, softplus_inv};
pub use affine::Affine;
pub use cubic::Cubic;
pub use cubic_rational::CubicRational;
pub use error::BijectionError;
pub use sinh::Sinh;
pub use spline::{Spline, SplineShape};
pub use stack::Stack;

/// Largest number of raw parameters of one scalar layer (spline with 16 bins).
pub const MAX_LAYER_RAW: usize = 3 * spline::MAX_BINS - 1;
/// Raw parameters of the analytic families and the affine map fit in this.
const SMALL_RAW: usize = 5;

/// A named constrained parameter and the open interval it must lie in.
#[derive(Clone, Copy, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub constraint: &'static str,
    pub low: f64,
    pub high: f64,
}

impl ParamSpec {
    pub const fn new(name: &'static str, constraint: &'static str, low: f64, high: f64) -> Self {
        Self {
            name,
            constraint,
            low,
            high,
        }
    }

    /// Whether `v` satisfies the constraint.
    pub fn admits(&self, v: f64) -> bool {
        v.is_finite() && v > self.low && v < self.high
    }
}

/// Value and the derivatives of `f` and `log f'` with respect to the input.
/// (Derivatives with respect to raw parameters are written into caller slices.)
#[derive(Clone, Copy, Debug)]
pub struct ScalarPartials<T> {
    pub f: T,
    /// f'(x)
    pub f_x: T,
    /// d log f'(x) / dx
    pub logd_x: T,
}

/// The kinds of scalar bijection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Family {
    CubicRational,
    Sinh,
    Cubic,
    Affine,
    Spline(SplineShape),
}

impl Family {
    /// Every family with default settings, in the order the UI lists them.
    pub const ALL: [Family; 5] = [
        Family::CubicRational,
        Family::Sinh,
        Family::Cubic,
        Family::Affine,
        Family::Spline(SplineShape {
            bins: 8,
            bound: 5.0,
        }),
    ];

    /// The name used on the command line and in model files.
    pub fn name(&self) -> &'static str {
        match self {
            Family::CubicRational => "cubic_rational",
            Family::Sinh => "sinh",
            Family::Cubic => "cubic",
            Family::Affine => "affine",
            Family::Spline(_) => "spline",
        }
    }

    /// Parses a family name (spline with its default shape).
    pub fn parse(name: &str) -> Result<Family, BijectionError> {
        Family::ALL
            .iter()
            .copied()
            .find(|f| f.name() == name)
            .ok_or_else(|| BijectionError::UnknownFamily(name.to_string()))
    }

    /// Number of raw parameters.
    pub fn n_raw(&self) -> usize {
        match self {
            Family::CubicRational => 3,
            Family::Sinh => 5,
            Family::Cubic => 4,
            Family::Affine => 2,
            Family::Spline(shape) => shape.n_raw(),
        }
    }

    /// The named constrained parameters (empty for the spline, which is
    /// described by its knots).
    pub fn params(&self) -> &'static [ParamSpec] {
        match self {
            Family::CubicRational => cubic_rational::PARAMS,
            Family::Sinh => sinh::PARAMS,
            Family::Cubic => cubic::PARAMS,
            Family::Affine => affine::PARAMS,
            Family::Spline(_) => &[],
        }
    }

    /// Which raw values flip sign under the reflection `x -> -x`: with those
    /// negated, the map becomes `x -> -f(-x)` (each is a shift whose raw-to-
    /// constrained transform is the identity). A layer whose flipping values
    /// are odd functions of what conditions it, and whose other values are even
    /// ones, is Z2-equivariant (docs/mathematics.md, section 8). `None` for the spline, which
    /// has no such form.
    pub fn odd_raw(&self) -> Option<&'static [bool]> {
        match self {
            // (alpha, beta, c): f(-x; -c) = -f(x; c)
            Family::CubicRational => Some(&[false, false, true]),
            // (s, beta, c, mu, nu): sinh and asinh are odd, so beta and c flip
            Family::Sinh => Some(&[false, true, true, false, false]),
            // (a, b, beta, c): g is odd, so beta and c flip
            Family::Cubic => Some(&[false, false, true, true]),
            // (s, t)
            Family::Affine => Some(&[false, true]),
            Family::Spline(_) => None,
        }
    }

    /// Default raw initialization (as bijx initializes), with `normal` drawing N(0, 1).
    pub fn default_raw(&self, normal: &mut dyn FnMut() -> f64) -> Vec<f64> {
        match self {
            Family::CubicRational => vec![0.01 * normal(), softplus_inv(0.9) - 1.0, 0.0],
            Family::Sinh => vec![softplus_inv(0.9), 0.01 * normal(), 0.0, 0.0, 0.0],
            Family::Cubic => {
                let b_raw = 2.0 * ((0.3f64).ln() / 2.0).atanh();
                vec![0.0, b_raw, 0.01 * normal(), 0.0]
            }
            Family::Affine => vec![0.0, 0.0],
            Family::Spline(shape) => (0..shape.n_raw()).map(|_| 0.01 * normal()).collect(),
        }
    }

    /// Raw values from named constrained values, checking every constraint.
    pub fn raw_from_constrained(&self, values: &[f64]) -> Result<Vec<f64>, BijectionError> {
        let specs = self.params();
        if values.len() != specs.len() {
            return Err(BijectionError::ParamCount {
                family: self.name(),
                expected: specs.len(),
                got: values.len(),
            });
        }
        for (spec, &v) in specs.iter().zip(values) {
            if !spec.admits(v) {
                return Err(BijectionError::OutsideConstraint {
                    param: spec.name,
                    value: v,
                    family: self.name(),
                    constraint: spec.constraint,
                });
            }
        }
        Ok(match self {
            Family::CubicRational => CubicRational::<f64>::raw_from_constrained(values),
            Family::Sinh => Sinh::<f64>::raw_from_constrained(values),
            Family::Cubic => Cubic::<f64>::raw_from_constrained(values),
            Family::Affine => Affine::<f64>::raw_from_constrained(values),
            Family::Spline(_) => {
                return Err(BijectionError::SplineByRawOnly);
            }
        })
    }
}

/// A layer's derivative: its logarithm, or the plain value where that is
/// cheaper (a chain multiplies those and takes one logarithm at the end).
#[derive(Clone, Copy, Debug)]
pub enum Slope<T> {
    Log(T),
    Ratio(T),
}

/// Sums log-derivatives along a chain, multiplying plain ratios and taking
/// their logarithm only when the product leaves a safe range (float32 included).
#[derive(Clone, Copy, Debug)]
pub struct LogSlopeSum<T> {
    log: T,
    product: T,
}

impl<T: Real> Default for LogSlopeSum<T> {
    fn default() -> Self {
        Self {
            log: T::zero(),
            product: T::one(),
        }
    }
}

impl<T: Real> LogSlopeSum<T> {
    #[inline(always)]
    pub fn add(&mut self, slope: Slope<T>) {
        match slope {
            Slope::Log(l) => self.log += l,
            Slope::Ratio(r) => {
                self.product *= r;
                self.renormalize();
            }
        }
    }

    /// Multiplies a plain ratio in without the range test: a caller that
    /// tests several sums at once ([`Self::in_range`]) renormalizes after.
    #[inline(always)]
    pub(super) fn multiply(&mut self, r: T) {
        self.product *= r;
    }

    /// Whether the product is still inside the range it is kept in,
    /// 1e-15..1e15 (false for NaN). One layer's ratio stays within 1e+-13
    /// for |x| up to 1e6, so the product never leaves float32's range before
    /// this test.
    #[inline(always)]
    pub(super) fn in_range(&self) -> bool {
        self.product > T::c(1e-15) && self.product < T::c(1e15)
    }

    /// Moves the product into the logarithm when it has left the range.
    #[inline(always)]
    pub(super) fn renormalize(&mut self) {
        if !self.in_range() {
            self.log += self.product.ln();
            self.product = T::one();
        }
    }

    #[inline(always)]
    pub fn value(&self) -> T {
        self.log + self.product.ln()
    }
}

/// One scalar layer with its constrained parameters computed from raw ones.
#[derive(Clone, Debug)]
pub enum Scalar<T> {
    CubicRational(CubicRational<T>),
    Sinh(Sinh<T>),
    Cubic(Cubic<T>),
    Affine(Affine<T>),
    Spline(Box<Spline<T>>),
}

impl<T: Real> Scalar<T> {
    /// Builds the layer of `family` from its raw parameters.
    pub fn from_raw(family: Family, raw: &[T]) -> Self {
        debug_assert_eq!(raw.len(), family.n_raw());
        match family {
            Family::CubicRational => Scalar::CubicRational(CubicRational::from_raw(raw)),
            Family::Sinh => Scalar::Sinh(Sinh::from_raw(raw)),
            Family::Cubic => Scalar::Cubic(Cubic::from_raw(raw)),
            Family::Affine => Scalar::Affine(Affine::from_raw(raw)),
            Family::Spline(shape) => Scalar::Spline(Box::new(Spline::from_raw(shape, raw))),
        }
    }

    /// The constrained parameter values in the family's order (empty for a spline).
    pub fn constrained(&self) -> Vec<f64> {
        match self {
            Scalar::CubicRational(b) => b.constrained(),
            Scalar::Sinh(b) => b.constrained(),
            Scalar::Cubic(b) => b.constrained(),
            Scalar::Affine(b) => b.constrained(),
            Scalar::Spline(_) => Vec::new(),
        }
    }

    /// `(f(z), log f'(z))`: the sampling direction.
    #[inline]
    pub fn x_from_z(&self, z: T) -> (T, T) {
        match self {
            Scalar::CubicRational(b) => b.x_from_z(z),
            Scalar::Sinh(b) => b.x_from_z(z),
            Scalar::Cubic(b) => b.x_from_z(z),
            Scalar::Affine(b) => b.x_from_z(z),
            Scalar::Spline(b) => b.x_from_z(z),
        }
    }

    /// `(f(z), f'(z))` with the derivative as a [`Slope`]: a plain ratio where
    /// that is cheaper than its logarithm.
    #[inline]
    pub fn x_from_z_slope(&self, z: T) -> (T, Slope<T>) {
        match self {
            Scalar::Cubic(b) => {
                let (x, ratio) = b.x_from_z_ratio(z);
                (x, Slope::Ratio(ratio))
            }
            Scalar::CubicRational(b) => {
                let (x, ratio) = b.x_from_z_ratio(z);
                (x, Slope::Ratio(ratio))
            }
            _ => {
                let (x, l) = self.x_from_z(z);
                (x, Slope::Log(l))
            }
        }
    }

    /// `(f^-1(x), f'(f^-1(x)))` with the derivative as a [`Slope`].
    #[inline]
    pub fn z_from_x_slope(&self, x: T) -> (T, Slope<T>) {
        match self {
            Scalar::Cubic(b) => {
                let (z, ratio) = b.z_from_x_ratio(x);
                (z, Slope::Ratio(ratio))
            }
            Scalar::CubicRational(b) => {
                let (z, ratio) = b.z_from_x_ratio(x);
                (z, Slope::Ratio(ratio))
            }
            _ => {
                let (z, l) = self.z_from_x(x);
                (z, Slope::Log(l))
            }
        }
    }

    /// `f(x0 + d) - y0` where `y0 = f(x0)`, without the cancellation of the plain
    /// difference when `d` is small against `x0` (exact algebra where the family
    /// allows it).
    #[inline]
    pub fn x_from_z_diff(&self, x0: T, y0: T, d: T) -> T {
        match self {
            Scalar::CubicRational(b) => b.diff(x0, d),
            Scalar::Cubic(b) => b.diff(x0, y0, d),
            Scalar::Affine(b) => b.diff(d),
            Scalar::Sinh(b) => b.diff(x0, y0, d),
            Scalar::Spline(b) => b.diff(x0, y0, d),
        }
    }

    /// `f^-1(y0 + e) - x0` where `y0 = f(x0)`: the plain inverse, then Newton
    /// steps on [`Scalar::x_from_z_diff`] to recover what the sum `y0 + e` lost.
    #[inline]
    pub fn z_from_x_diff(&self, x0: T, y0: T, e: T) -> T {
        let mut delta = self.z_from_x(y0 + e).0 - x0;
        for _ in 0..2 {
            let residual = self.x_from_z_diff(x0, y0, delta) - e;
            let slope = self.x_from_z(x0 + delta).1.exp();
            delta -= residual / slope;
        }
        delta
    }

    /// `f(z)` without its log-derivative.
    #[inline]
    pub fn x_from_z_value(&self, z: T) -> T {
        match self {
            Scalar::Cubic(b) => b.x_from_z_value(z),
            _ => self.x_from_z(z).0,
        }
    }

    /// `(f^-1(x), log f'(f^-1(x)))`: the density direction. Note the sign: the
    /// second value is `log f'` at the output, so `log |dz/dx|` is its negative.
    #[inline]
    pub fn z_from_x(&self, x: T) -> (T, T) {
        match self {
            Scalar::CubicRational(b) => b.z_from_x(x),
            Scalar::Sinh(b) => b.z_from_x(x),
            Scalar::Cubic(b) => b.z_from_x(x),
            Scalar::Affine(b) => b.z_from_x(x),
            Scalar::Spline(b) => b.z_from_x(x),
        }
    }

    /// Partial derivatives at `t`, where `y = f(t)` is already known (the
    /// families that can use it skip re-solving); raw-parameter derivatives of `f`
    /// and `log f'` go to `f_raw` and `logd_raw` (each `n_raw` long).
    #[inline]
    pub fn partials(&self, t: T, y: T, f_raw: &mut [T], logd_raw: &mut [T]) -> ScalarPartials<T> {
        match self {
            Scalar::CubicRational(b) => b.partials(t, f_raw, logd_raw),
            Scalar::Sinh(b) => b.partials(t, f_raw, logd_raw),
            Scalar::Cubic(b) => b.partials_at(t, y, f_raw, logd_raw),
            Scalar::Affine(b) => b.partials(t, f_raw, logd_raw),
            Scalar::Spline(b) => b.partials(t, f_raw, logd_raw),
        }
    }

    /// Reverse-mode rule of `x = f(z)`, `ld = log f'(z)`: given the adjoints of
    /// `x` and `ld`, adds the raw-parameter adjoints to `raw_bar` and returns
    /// the adjoint of `z`.
    #[inline]
    pub fn x_from_z_vjp(&self, z: T, x: T, x_bar: T, ld_bar: T, raw_bar: &mut [T]) -> T {
        // Small scratch for the analytic families; the spline needs more.
        if raw_bar.len() <= SMALL_RAW {
            self.x_from_z_vjp_n::<SMALL_RAW>(z, x, x_bar, ld_bar, raw_bar)
        } else {
            self.x_from_z_vjp_n::<MAX_LAYER_RAW>(z, x, x_bar, ld_bar, raw_bar)
        }
    }

    #[inline]
    fn x_from_z_vjp_n<const N: usize>(
        &self,
        z: T,
        x: T,
        x_bar: T,
        ld_bar: T,
        raw_bar: &mut [T],
    ) -> T {
        let n = raw_bar.len();
        let mut f_raw = [T::zero(); N];
        let mut l_raw = [T::zero(); N];
        let p = self.partials(z, x, &mut f_raw[..n], &mut l_raw[..n]);
        for i in 0..n {
            raw_bar[i] += x_bar * f_raw[i] + ld_bar * l_raw[i];
        }
        x_bar * p.f_x + ld_bar * p.logd_x
    }

    /// Reverse-mode rule of `z = f^-1(x)`, `ld = -log f'(z)` (the log-det of the
    /// density direction), by implicit differentiation at the output `z`: given
    /// the adjoints of `z` and `ld`, adds raw adjoints and returns that of `x`.
    #[inline]
    pub fn z_from_x_vjp(&self, z: T, x: T, z_bar: T, ld_bar: T, raw_bar: &mut [T]) -> T {
        if raw_bar.len() <= SMALL_RAW {
            self.z_from_x_vjp_n::<SMALL_RAW>(z, x, z_bar, ld_bar, raw_bar)
        } else {
            self.z_from_x_vjp_n::<MAX_LAYER_RAW>(z, x, z_bar, ld_bar, raw_bar)
        }
    }

    #[inline]
    fn z_from_x_vjp_n<const N: usize>(
        &self,
        z: T,
        x: T,
        z_bar: T,
        ld_bar: T,
        raw_bar: &mut [T],
    ) -> T {
        let n = raw_bar.len();
        let mut f_raw = [T::zero(); N];
        let mut l_raw = [T::zero(); N];
        let p = self.partials(z, x, &mut f_raw[..n], &mut l_raw[..n]);
        // dz/dx = 1/f', dz/dθ = -f_θ/f'; ld = -log f'(z(x, θ), θ).
        let g = z_bar - ld_bar * p.logd_x;
        let inv_fx = T::one() / p.f_x;
        for i in 0..n {
            raw_bar[i] -= g * f_raw[i] * inv_fx + ld_bar * l_raw[i];
        }
        g * inv_fx
    }
}
