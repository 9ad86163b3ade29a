//! The float types the mathematics is generic over: `f64` is the reference,
//! `f32` is what the GPU kernels compute.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// Runs `f` compiled for the widest vector instructions this processor has:
/// on x86-64 AVX-512 or AVX2 where the processor has them, chosen at run time
/// (a build for any x86-64 otherwise uses only SSE2's four lanes); in the
/// browser `f` itself, since the page is built with WebAssembly's simd128.
///
/// Only what is inlined into `f` gets the wider instructions, so the loops it
/// runs are `#[inline(always)]`. The arithmetic is the same operation for
/// operation (no fused multiply-adds are introduced), so the results are the
/// same bits on every processor.
#[inline(always)]
pub fn on_widest_vectors<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static ARCH: std::sync::LazyLock<pulp::Arch> = std::sync::LazyLock::new(pulp::Arch::new);
        ARCH.dispatch(f)
    }
    #[cfg(target_arch = "wasm32")]
    f()
}

/// Runs `f` compiled for AVX2 and FMA where the processor has them (on
/// x86-64; elsewhere just `f()`): the packed stacks' passes
/// (`bijection::lanes`). As in [`on_widest_vectors`], `f` and all it calls
/// must be `#[inline(always)]`, and the arithmetic is the same operation for
/// operation (Rust never fuses a multiply and an add by itself), so the bits
/// are those of the build's own vectors. AVX-512 made those passes no faster
/// (the chains are bound by latency, not width).
#[inline(always)]
pub fn on_avx2<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        static V3: std::sync::LazyLock<Option<pulp::x86::V3>> =
            std::sync::LazyLock::new(pulp::x86::V3::try_new);
        if let Some(simd) = *V3 {
            return pulp::Simd::vectorize(simd, f);
        }
    }
    f()
}

/// Values from which [`on_widest_vectors_for`] takes the widest vectors.
/// Chosen when the radial flows' passes, dispatched the same way, ran slower;
/// that proved to be their chains' latency with too few lanes in flight
/// (`bijection::lanes`), not the loops' length, and the threshold has not
/// been measured again.
pub const WIDE_FROM: usize = 8192;

/// [`on_widest_vectors`] for a loop over `values` values: on the widest
/// vectors from [`WIDE_FROM`] values, on the build's own below.
#[inline(always)]
pub fn on_widest_vectors_for<R>(values: usize, f: impl FnOnce() -> R) -> R {
    if values >= WIDE_FROM {
        on_widest_vectors(f)
    } else {
        f()
    }
}

/// A real number type: the small set of operations the bijections need.
pub trait Real:
    Copy
    + Clone
    + Debug
    + Display
    + Default
    + PartialEq
    + PartialOrd
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Sum
    + ndarray::LinalgScalar
{
    /// Machine epsilon.
    const EPSILON: Self;
    /// Largest finite value.
    const MAX: Self;
    /// Whether this is the 32-bit type (the GPU's precision).
    const IS_F32: bool;

    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;

    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn exp_m1(self) -> Self;
    fn sqrt(self) -> Self;
    fn cbrt(self) -> Self;
    /// Cube root of a positive normal number whose cube-sized neighbours stay
    /// finite (about 1e-25 to 1e25 in float32), without branches: the core of
    /// [`Self::cbrt`], which scales other inputs into that range first.
    fn cbrt_normal(self) -> Self;
    /// `x^(-1/3)` of a positive normal `x` up to about 1e25 (the cubic
    /// family's inverse asks for 1 to 2e15), by a bit-level first guess and
    /// Newton steps `r (4 - x r^3) / 3`: no division, no branch, so the lane
    /// kernels run it as vector instructions. Within a few ulp.
    fn rcbrt_normal(self) -> Self;
    /// `exp` of every value in place, as one loop the compiler vectorizes:
    /// float32 by [`exp_f32_in_place`], float64 by the standard library.
    fn exp_in_place(values: &mut [Self]);
    /// `ln(1 + x)` of every value in place, vectorized as [`Self::exp_in_place`]
    /// ([`ln_1p_f32_in_place`] for float32).
    fn ln_1p_in_place(values: &mut [Self]);
    /// `exp(x) - 1` of every value in place, vectorized as [`Self::exp_in_place`]
    /// ([`exp_m1_f32_in_place`] for float32).
    fn exp_m1_in_place(values: &mut [Self]);
    fn powf(self, e: Self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn tanh(self) -> Self;
    fn asinh(self) -> Self;
    fn atan2(self, other: Self) -> Self;
    fn abs(self) -> Self;
    fn floor(self) -> Self;
    fn max(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
    fn is_finite(self) -> bool;
    fn is_nan(self) -> bool;

    /// The constant `v`.
    #[inline(always)]
    fn c(v: f64) -> Self {
        Self::from_f64(v)
    }
    /// Sign with sgn(0) = +1, as the stable inverses require.
    #[inline(always)]
    fn sign_nonneg(self) -> Self {
        if self < Self::zero() {
            -Self::one()
        } else {
            Self::one()
        }
    }
    #[inline(always)]
    fn powi2(self) -> Self {
        self * self
    }
}

macro_rules! impl_real {
    (
        $t:ty,
        $is32:expr,
        $bits:ty,
        $ibits:ty,
        $magic:expr,
        $iters:expr,
        $rcbrt_magic:expr,
        $rcbrt_iters:expr,
        $exp_in_place:ident,
        $ln_1p_in_place:ident,
        $exp_m1_in_place:ident
    ) => {
        impl Real for $t {
            const EPSILON: Self = <$t>::EPSILON;
            const MAX: Self = <$t>::MAX;
            const IS_F32: bool = $is32;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            /// Cube root by a bit-level first guess and Halley steps (the
            /// software `cbrt` of the standard library is several times slower).
            #[inline(always)]
            fn cbrt(self) -> Self {
                let a = self.abs();
                if a == 0.0 || !a.is_finite() {
                    return self;
                }
                // Tiny (subnormal) and huge inputs: scale by 2^(+-90) first, so
                // neither the bit guess nor y^3 + 2a leaves the normal range.
                let (a, unscale) = if a < <$t>::MIN_POSITIVE * 1e6 {
                    (a * 2f64.powi(90) as $t, 2f64.powi(-30) as $t)
                } else if a > <$t>::MAX / 16.0 {
                    (a * 2f64.powi(-90) as $t, 2f64.powi(30) as $t)
                } else {
                    (a, 1.0)
                };
                (a.cbrt_normal() * unscale).copysign(self)
            }
            #[inline(always)]
            fn exp_in_place(values: &mut [Self]) {
                $exp_in_place(values)
            }
            #[inline(always)]
            fn ln_1p_in_place(values: &mut [Self]) {
                $ln_1p_in_place(values)
            }
            #[inline(always)]
            fn exp_m1_in_place(values: &mut [Self]) {
                $exp_m1_in_place(values)
            }
            #[inline(always)]
            fn cbrt_normal(self) -> Self {
                let mut y = <$t>::from_bits(self.to_bits() / 3 + $magic);
                for _ in 0..$iters {
                    let y3 = y * y * y;
                    y *= (y3 + 2.0 * self) / (2.0 * y3 + self);
                }
                y
            }
            #[inline(always)]
            fn rcbrt_normal(self) -> Self {
                // bits / 3: the form each target's vector unit has. simd128
                // has a saturating float-to-integer conversion but no integer
                // multiply-high, SSE the reverse (the compiler divides by a
                // constant with a multiply-high, and converts a float with
                // saturation lane by lane): either is exact enough for a guess.
                let third_bits = if cfg!(target_arch = "wasm32") {
                    (self.to_bits() as $ibits as $t * (1.0 / 3.0)) as $ibits as $bits
                } else {
                    self.to_bits() / 3
                };
                let mut r = <$t>::from_bits($rcbrt_magic - third_bits);
                let third = self * (1.0 / 3.0);
                for _ in 0..$rcbrt_iters {
                    r *= 4.0 / 3.0 - third * (r * r * r);
                }
                r
            }
            #[inline(always)]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                <$t>::sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                <$t>::cosh(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline(always)]
            fn asinh(self) -> Self {
                <$t>::asinh(self)
            }
            #[inline(always)]
            fn atan2(self, other: Self) -> Self {
                <$t>::atan2(self, other)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                <$t>::min(self, other)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

impl_real!(
    f32,
    true,
    u32,
    i32,
    709_921_077,
    2,
    // the first guess within 3.5 %, then 2.3e-3, 1.1e-5, 2.4e-10
    0x54A2_329C,
    3,
    exp_f32_in_place,
    ln_1p_f32_in_place,
    exp_m1_f32_in_place
);
impl_real!(
    f64,
    false,
    u64,
    i64,
    0x2A9F_7893_782D_A1CE,
    3,
    0x553E_F100_0000_0000,
    4,
    exp_f64_in_place,
    ln_1p_f64_in_place,
    exp_m1_f64_in_place
);

/// `exp` of every value by range reduction and a polynomial, without calls or
/// branches, so that it runs as vector instructions: within 2 ulp of the
/// standard library's `exp` (tested). A slice with a value outside
/// [-87.3, 88] (where the result leaves the normal numbers or the reduction's
/// range) or a NaN is left to the standard library. Always inlined, so that
/// inside [`on_widest_vectors`] it runs on the widest vectors too.
#[inline(always)]
pub fn exp_f32_in_place(values: &mut [f32]) {
    // a fold, not `any`: without an early exit the check vectorizes too
    let outside = values
        .iter()
        .fold(false, |out, &x| out | !((-87.3..=88.0).contains(&x)));
    if outside {
        values.iter_mut().for_each(|v| *v = v.exp());
        return;
    }
    for v in values.iter_mut() {
        *v = exp_f32_reduced(*v);
    }
}

/// `exp(x)` for x in [-87.3, 88] by range reduction and a polynomial.
#[inline(always)]
fn exp_f32_reduced(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n * LN2_HI is exact for every n used here
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // adding and removing 1.5 * 2^23 rounds to the nearest integer
    const ROUND: f32 = 12_582_912.0;
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // 2^n, n in [-126, 127]: the biased exponent n + 127 read off the low
    // bits of (n + 127) + 2^23 (an integer cast would saturate, lane by lane)
    let biased = (n + (127.0 + 8_388_608.0)).to_bits() - 0x4B00_0000;
    p * f32::from_bits(biased << 23)
}

/// `exp(x) - 1` of every value without calls or branches (vector
/// instructions): a Taylor polynomial near 0, where `exp(x) - 1` would cancel,
/// and the vector `exp` minus one elsewhere; within a few ulp of the standard
/// library's `exp_m1` (tested). A slice with a value outside [-87.3, 88] or a
/// NaN is left to the standard library.
#[inline(always)]
pub fn exp_m1_f32_in_place(values: &mut [f32]) {
    let outside = values
        .iter()
        .fold(false, |out, &x| out | !((-87.3..=88.0).contains(&x)));
    if outside {
        values.iter_mut().for_each(|v| *v = v.exp_m1());
        return;
    }
    for v in values.iter_mut() {
        let x = *v;
        // |x| < 1/2: the series to x^9 is exact to float32 there
        let near = x
            * (1.0
                + x * (0.5
                    + x * (1.0 / 6.0
                        + x * (1.0 / 24.0
                            + x * (1.0 / 120.0
                                + x * (1.0 / 720.0
                                    + x * (1.0 / 5040.0
                                        + x * (1.0 / 40320.0 + x * (1.0 / 362_880.0)))))))));
        let far = exp_f32_reduced(x) - 1.0;
        *v = if x.abs() < 0.5 { near } else { far };
    }
}

/// `ln(1 + x)` of every value without calls or branches (vector
/// instructions): `1 + x = m 2^e` with `m` in [sqrt(1/2), sqrt(2)), `ln m` by
/// the series of `2 atanh(s)`, `s = (m - 1) / (m + 1)`, and the rounding of
/// `1 + x` corrected; within a few ulp of the standard library's `ln_1p`
/// (tested). A slice with a value at or below -0.9999, above 1e30 or a NaN is
/// left to the standard library.
#[inline(always)]
pub fn ln_1p_f32_in_place(values: &mut [f32]) {
    // ln 2 split so that e * LN2_HI is exact for every exponent e here
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // the bits of sqrt(1/2): subtracting them puts the exponent's step there
    const SQRT_HALF_BITS: u32 = 0x3F35_04F3;
    let outside = values
        .iter()
        .fold(false, |out, &x| out | !(x > -0.9999 && x <= 1e30));
    if outside {
        values.iter_mut().for_each(|v| *v = v.ln_1p());
        return;
    }
    for v in values.iter_mut() {
        let x = *v;
        let u = 1.0 + x;
        let shifted = u.to_bits().wrapping_sub(SQRT_HALF_BITS);
        let e = ((shifted as i32) >> 23) as f32;
        let m = f32::from_bits((shifted & 0x007F_FFFF).wrapping_add(SQRT_HALF_BITS));
        let f = m - 1.0;
        let s = f / (2.0 + f);
        let s2 = s * s;
        let tail = s2 * (2.0 / 3.0 + s2 * (2.0 / 5.0 + s2 * (2.0 / 7.0 + s2 * (2.0 / 9.0))));
        let ln_m = f - s * (f - tail);
        // what 1 + x lost to rounding, to first order
        let lost = (x - (u - 1.0)) / u;
        *v = e * LN2_HI + (e * LN2_LO + ln_m + lost);
    }
}

/// `ln(1 + x)` of every value (float64 keeps the standard library's).
pub fn ln_1p_f64_in_place(values: &mut [f64]) {
    for v in values.iter_mut() {
        *v = v.ln_1p();
    }
}

/// `exp(x) - 1` of every value (float64 keeps the standard library's).
pub fn exp_m1_f64_in_place(values: &mut [f64]) {
    for v in values.iter_mut() {
        *v = v.exp_m1();
    }
}

/// `exp` of every value (float64 keeps the standard library's).
#[inline(always)]
pub fn exp_f64_in_place(values: &mut [f64]) {
    for v in values.iter_mut() {
        *v = v.exp();
    }
}

/// `log(1 + e^t)` without overflow.
#[inline(always)]
pub fn softplus<T: Real>(t: T) -> T {
    if t > T::c(20.0) {
        t + (-t).exp().ln_1p()
    } else {
        t.exp().ln_1p()
    }
}

/// Inverse of [`softplus`]: `log(e^y - 1)` for `y > 0`.
pub fn softplus_inv<T: Real>(y: T) -> T {
    if y > T::c(20.0) {
        y + (-(-y).exp()).ln_1p()
    } else {
        y.exp_m1().ln()
    }
}

/// The logistic function `1 / (1 + e^-t)`.
#[inline(always)]
pub fn sigmoid<T: Real>(t: T) -> T {
    if t >= T::zero() {
        T::one() / (T::one() + (-t).exp())
    } else {
        let e = t.exp();
        e / (T::one() + e)
    }
}

/// `log cosh(a)` without overflow.
#[inline(always)]
pub fn log_cosh<T: Real>(a: T) -> T {
    let m = a.abs();
    m + (T::c(-2.0) * m).exp().ln_1p() - T::c(std::f64::consts::LN_2)
}

/// `1 / cosh(a)` without overflow.
#[inline(always)]
pub fn sech<T: Real>(a: T) -> T {
    let e = (-a.abs()).exp();
    T::c(2.0) * e / (T::one() + e * e)
}

/// Dot product with eight running sums: a plain `sum()` is one dependent chain
/// of additions, which the compiler may not reorder into vector lanes.
#[inline]
pub fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::zero(); 8];
    let (a8, a_rest) = a.split_at(a.len() - a.len() % 8);
    let (b8, b_rest) = b.split_at(a8.len().min(b.len()));
    for (ca, cb) in a8.chunks_exact(8).zip(b8.chunks_exact(8)) {
        for k in 0..8 {
            acc[k] += ca[k] * cb[k];
        }
    }
    let mut total =
        ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (&x, &y) in a_rest.iter().zip(b_rest) {
        total += x * y;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_the_plain_sum_for_every_length() {
        for n in 0..40 {
            let a: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
            let b: Vec<f64> = (0..n).map(|i| (i as f64 * 1.1).cos()).collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-12, "n = {n}");
        }
    }

    /// Distance in units in the last place between two floats of one sign
    /// (0 and -0 are one value).
    fn ulps(a: f32, b: f32) -> u32 {
        if a == b {
            return 0;
        }
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn the_inverse_cube_root_is_within_a_few_ulp() {
        // the range the cubic family asks for (1 to 2e15) and beyond, densely
        let mut x = 1e-20f64;
        let mut worst = (0u32, 0f64);
        while x < 1e25 {
            let x32 = x as f32;
            let want = (x32 as f64).powf(-1.0 / 3.0) as f32;
            let err = ulps(want, x32.rcbrt_normal());
            if err > worst.0 {
                worst = (err, x);
            }
            let want64 = x.powf(-1.0 / 3.0);
            let got64 = x.rcbrt_normal();
            assert!(
                (got64 - want64).abs() <= 8.0 * f64::EPSILON * want64,
                "rcbrt({x}) = {got64} vs {want64}"
            );
            x *= 1.0137;
        }
        assert!(worst.0 <= 3, "worst {} ulp at {}", worst.0, worst.1);
        assert_eq!(8f32.rcbrt_normal(), 0.5);
    }

    #[test]
    fn the_vector_exp_is_within_two_ulp_of_the_standard_one() {
        // a dense sweep of the polynomial's range, both ends included
        let xs: Vec<f32> = (0..=200_000)
            .map(|i| -87.3 + (88.0 + 87.3) * i as f32 / 200_000.0)
            .chain([-87.3, 88.0, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5])
            .collect();
        let mut fast = xs.clone();
        exp_f32_in_place(&mut fast);
        let worst = xs
            .iter()
            .zip(&fast)
            .map(|(&x, &e)| ulps(x.exp(), e))
            .max()
            .unwrap_or(0);
        assert!(worst <= 2, "worst error {worst} ulp");
        // outside the range, and NaN, the standard library answers
        let mut edge = [f32::NAN, 100.0, -100.0, 0.25];
        exp_f32_in_place(&mut edge);
        assert!(edge[0].is_nan());
        assert_eq!(edge[1], f32::INFINITY);
        assert_eq!(edge[2], (-100f32).exp());
        assert_eq!(edge[3], 0.25f32.exp());
    }

    /// The worst error of `fast` against `exact` over `xs`, in ulp.
    fn worst_ulps(xs: &[f32], fast: fn(&mut [f32]), exact: fn(f32) -> f32) -> u32 {
        let mut values = xs.to_vec();
        // in slices of eight, as the lane kernels call them
        for chunk in values.chunks_mut(8) {
            fast(chunk);
        }
        xs.iter()
            .zip(&values)
            .map(|(&x, &v)| ulps(exact(x), v))
            .max()
            .unwrap_or(0)
    }

    /// A sweep of `[lo, hi]`, on a log scale out from 0 on both sides.
    fn sweep(lo: f32, hi: f32) -> Vec<f32> {
        let mut xs = vec![0.0, -0.0];
        for i in 0..=100_000 {
            let t = i as f32 / 100_000.0;
            let magnitude = (1e-12f32).ln() * (1.0 - t) + t * hi.abs().max(lo.abs()).ln();
            let m = magnitude.exp();
            xs.extend([m, -m].into_iter().filter(|v| (lo..=hi).contains(v)));
        }
        xs.extend((0..=20_000).map(|i| lo + (hi - lo) * i as f32 / 20_000.0));
        xs
    }

    #[test]
    fn the_vector_exp_m1_and_ln_1p_are_within_a_few_ulp_of_the_standard_ones() {
        let worst = worst_ulps(&sweep(-87.3, 88.0), exp_m1_f32_in_place, f32::exp_m1);
        println!("exp_m1: worst error {worst} ulp");
        assert!(worst <= 2, "exp_m1: worst error {worst} ulp");
        let worst = worst_ulps(&sweep(-0.9999, 1e30), ln_1p_f32_in_place, f32::ln_1p);
        println!("ln_1p: worst error {worst} ulp");
        assert!(worst <= 2, "ln_1p: worst error {worst} ulp");
        // outside their ranges, and NaN, the standard library answers
        let mut edge = [f32::NAN, 100.0, -1.0, 0.25];
        exp_m1_f32_in_place(&mut edge);
        assert!(edge[0].is_nan());
        assert_eq!(edge[1], f32::INFINITY);
        assert_eq!(edge[2], (-1f32).exp_m1());
        let mut edge = [f32::NAN, -1.0, 1e35, 0.25];
        ln_1p_f32_in_place(&mut edge);
        assert!(edge[0].is_nan());
        assert_eq!(edge[1], f32::NEG_INFINITY);
        assert_eq!(edge[2], 1e35f32.ln_1p());
    }

    #[test]
    fn the_branchless_cube_root_is_the_cube_root() {
        for &x in &[1.0f32, 2.0, 3.5, 1e-20, 1e20, 123.456, 0.001] {
            let y = x.cbrt_normal();
            assert!(ulps(y, x.cbrt()) <= 2, "{x}: {y} against {}", x.cbrt());
        }
    }
}
