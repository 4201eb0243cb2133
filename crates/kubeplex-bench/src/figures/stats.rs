//! Min / median / max over repeats, and baseline-vs-kubeplex figures.

use serde::Serialize;

/// Samples of one side of one figure.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub samples: Vec<f64>,
}

impl Spread {
    pub fn of(samples: &[f64]) -> Self {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            return Self {
                min: f64::NAN,
                median: f64::NAN,
                max: f64::NAN,
                samples: samples.to_vec(),
            };
        }
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Self {
            min: sorted[0],
            median,
            max: sorted[n - 1],
            samples: samples.to_vec(),
        }
    }
}

/// One figure: baseline, kubeplex, and kubeplex / baseline of the medians.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Figure {
    pub name: String,
    pub unit: &'static str,
    pub baseline: Spread,
    pub kubeplex: Spread,
    /// kubeplex median / baseline median.
    pub ratio: f64,
}

impl Figure {
    pub fn new(
        name: impl Into<String>,
        unit: &'static str,
        baseline: &[f64],
        kubeplex: &[f64],
    ) -> Self {
        let baseline = Spread::of(baseline);
        let kubeplex = Spread::of(kubeplex);
        let ratio = kubeplex.median / baseline.median;
        Self {
            name: name.into(),
            unit,
            baseline,
            kubeplex,
            ratio,
        }
    }
}

/// The `p`-th percentile (0..=100) of `values`, nearest rank.
pub(crate) fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A straight line through points, by least squares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LinearFit {
    pub slope: f64,
    pub intercept: f64,
    /// How much of the variation the line explains (1 = every point on it).
    pub r_squared: f64,
}

pub(crate) fn linear_fit(points: &[(f64, f64)]) -> LinearFit {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    let slope = sxy / sxx;
    LinearFit {
        slope,
        intercept: mean_y - slope * mean_x,
        r_squared: if syy == 0.0 {
            1.0
        } else {
            sxy * sxy / (sxx * syy)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_fitted_exactly_and_noise_lowers_r_squared() {
        let exact = linear_fit(&[(10.0, 1500.0), (50.0, 5500.0), (100.0, 10500.0)]);
        assert!((exact.slope - 100.0).abs() < 1e-9, "{exact:?}");
        assert!((exact.intercept - 500.0).abs() < 1e-6, "{exact:?}");
        assert!((exact.r_squared - 1.0).abs() < 1e-12, "{exact:?}");
        let noisy = linear_fit(&[(10.0, 1500.0), (50.0, 9000.0), (100.0, 10500.0)]);
        assert!(noisy.r_squared < 0.95, "{noisy:?}");
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let spread = Spread::of(&[4.0, 1.0, 3.0, 2.0, f64::NAN]);
        assert_eq!((spread.min, spread.median, spread.max), (1.0, 2.5, 4.0));
    }
}
