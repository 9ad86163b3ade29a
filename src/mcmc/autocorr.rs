//! Means of correlated Monte Carlo series with honest error bars: the
//! integrated autocorrelation time by Madras and Sokal's automatic window
//! (Wolff's Gamma method, "Monte Carlo errors with less errors", 2004).

/// A Monte Carlo estimate: the mean, its error, and the integrated
/// autocorrelation time (in units of the series' spacing; 0.5 = independent).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub error: f64,
    pub tau_int: f64,
}

/// The window factor: sum the autocorrelation function up to the first W
/// with W >= C * tau_int(W).
const WINDOW: f64 = 6.0;

/// The estimate of the series' mean.
pub fn estimate(series: &[f64]) -> Estimate {
    let n = series.len();
    if n == 0 {
        return Estimate {
            mean: f64::NAN,
            error: f64::NAN,
            tau_int: f64::NAN,
        };
    }
    let mean = series.iter().sum::<f64>() / n as f64;
    let gamma = |t: usize| {
        (0..n - t)
            .map(|i| (series[i] - mean) * (series[i + t] - mean))
            .sum::<f64>()
            / (n - t) as f64
    };
    let g0 = gamma(0);
    if n < 2 || g0 <= 0.0 {
        return Estimate {
            mean,
            error: 0.0,
            tau_int: 0.5,
        };
    }
    let mut tau = 0.5;
    for w in 1..n / 2 {
        tau += gamma(w) / g0;
        if w as f64 >= WINDOW * tau {
            break;
        }
    }
    // a window cut too early can give tau below its floor
    let tau = tau.max(0.5);
    Estimate {
        mean,
        error: (2.0 * tau * g0 / n as f64).sqrt(),
        tau_int: tau,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn independent_samples_have_tau_one_half_and_the_textbook_error() {
        let mut rng = Rng::seeded(1);
        let xs: Vec<f64> = (0..20_000).map(|_| rng.normal()).collect();
        let e = estimate(&xs);
        assert!((e.tau_int - 0.5).abs() < 0.1, "{e:?}");
        assert!((e.error - 1.0 / (20_000f64).sqrt()).abs() < 0.1 / (20_000f64).sqrt());
        assert!(e.mean.abs() < 4.0 * e.error);
    }

    #[test]
    fn an_ar1_series_has_its_known_autocorrelation_time() {
        // x_t = a x_{t-1} + noise: tau_int = (1 + a) / (2 (1 - a))
        let a = 0.8;
        let mut rng = Rng::seeded(2);
        let mut x = 0.0;
        let xs: Vec<f64> = (0..200_000)
            .map(|_| {
                x = a * x + rng.normal();
                x
            })
            .collect();
        let e = estimate(&xs);
        let exact = (1.0 + a) / (2.0 * (1.0 - a));
        assert!((e.tau_int - exact).abs() < 0.1 * exact, "{e:?} vs {exact}");
    }
}
