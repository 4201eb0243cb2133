//! Min / median / max over repeats, and baseline-vs-kubeplex figures.

use serde::Serialize;

/// Samples of one side of one figure.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Spread {
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
pub struct Figure {
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
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
