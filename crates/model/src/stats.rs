//! Two statistics every policy and report uses.

/// Arithmetic mean; 0 for an empty slice.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Coefficient of variation: population standard deviation over mean. 0 when the slice is
/// empty or its mean is 0 (no load means no imbalance).
///
/// ```
/// use threadbalance_model::coefficient_of_variation;
/// // mean 2, deviations -1, +1 → σ = 1 → CV 0.5
/// assert!((coefficient_of_variation(&[1.0, 3.0]) - 0.5).abs() < 1e-12);
/// ```
pub fn coefficient_of_variation(xs: &[f64]) -> f64 {
    let m = mean(xs);
    if xs.is_empty() || m <= 0.0 {
        return 0.0;
    }
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    var.sqrt() / m
}
