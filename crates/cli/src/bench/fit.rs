//! The one line fit `bench --cost` makes: a cost as a fixed part and a part per unit (a
//! tick per thread, a plan per change), least squares on the relative error.

/// Least squares of `y = a + b·x` over `points` (x = threads and y = µs per tick, or x =
/// changes in a plan and y = µs per plan) on the relative error: each point weighted by
/// 1/y², so a 4-thread tick of 40 µs counts as much as a 1024-thread tick of 13 ms (plain
/// least squares would fit the largest alone). Both
/// parts are held at 0 or more: a negative part means the runs cannot tell it from nothing
/// (then the line through the origin, or the flat line at the weighted mean). `None` with
/// fewer than two distinct x, or a point that is not positive.
pub fn fit_line(points: &[(usize, f64)]) -> Option<(f64, f64)> {
    if !points.iter().all(|p| p.1 > 0.0) {
        return None;
    }
    let w = |p: &(usize, f64)| 1.0 / (p.1 * p.1);
    let x = |p: &(usize, f64)| p.0 as f64;
    let sw: f64 = points.iter().map(w).sum();
    let sx: f64 = points.iter().map(|p| w(p) * x(p)).sum();
    let sy: f64 = points.iter().map(|p| w(p) * p.1).sum();
    let sxx: f64 = points.iter().map(|p| w(p) * x(p) * x(p)).sum();
    let sxy: f64 = points.iter().map(|p| w(p) * x(p) * p.1).sum();
    let det = sw * sxx - sx * sx;
    if points.len() < 2 || det <= 1e-12 * sw * sxx {
        return None;
    }
    let b = (sw * sxy - sx * sy) / det;
    let a = (sy - b * sx) / sw;
    if a < 0.0 {
        return Some((0.0, (sxy / sxx).max(0.0)));
    }
    if b < 0.0 {
        return Some((sy / sw, 0.0));
    }
    Some((a, b))
}

#[cfg(test)]
mod tests {
    use super::fit_line;

    #[test]
    fn fit_line_worked_example_weighs_each_point_by_its_relative_error() {
        // Points (1, 10), (2, 10), (4, 20), weights 1/y² = 1/100, 1/100, 1/400, or 4, 4, 1
        // scaled by 400 (the scale cancels). Σw = 9, Σwx = 4 + 8 + 4 = 16,
        // Σwy = 40 + 40 + 20 = 100, Σwx² = 4 + 16 + 16 = 36, Σwxy = 40 + 80 + 80 = 200.
        // b = (9·200 − 16·100) / (9·36 − 16²) = 200 / 68 = 2.941…;
        // a = (100 − 16·b) / 9 = 5.882…
        let (a, b) = fit_line(&[(1, 10.0), (2, 10.0), (4, 20.0)]).unwrap();
        assert!((b - 200.0 / 68.0).abs() < 1e-9, "{b}");
        assert!(
            (a - (100.0 - 16.0 * 200.0 / 68.0) / 9.0).abs() < 1e-9,
            "{a}"
        );
        // A line given exactly comes back exactly, whatever the weights: 20 + 1.9 T.
        let exact: Vec<(usize, f64)> = [1, 17, 64, 1024]
            .iter()
            .map(|&t| (t, 20.0 + 1.9 * t as f64))
            .collect();
        let (a, b) = fit_line(&exact).unwrap();
        assert!((a - 20.0).abs() < 1e-6 && (b - 1.9).abs() < 1e-9, "{a} {b}");
    }

    #[test]
    fn fit_line_negative_parts_are_held_at_zero() {
        // (10, 10), (20, 30): the line 2x − 10 has a negative fixed part; through the
        // origin, weights 1/100 and 1/900: b = Σwxy / Σwx² = (1 + 600/900) / (1 + 400/900)
        // = (15/9) / (13/9) = 15/13.
        let (a, b) = fit_line(&[(10, 10.0), (20, 30.0)]).unwrap();
        assert_eq!(a, 0.0);
        assert!((b - 15.0 / 13.0).abs() < 1e-12, "{b}");
        // Falling with the thread count: no per-thread part; the weighted mean
        // (30/900 + 10/100) / (1/900 + 1/100) = (1/30 + 1/10) / (1/900 + 9/900) = 12.
        let (a, b) = fit_line(&[(10, 30.0), (20, 10.0)]).unwrap();
        assert!((a - 12.0).abs() < 1e-9 && b == 0.0, "{a} {b}");
        // One thread count (twice), none, or a tick not measured: no line.
        assert_eq!(fit_line(&[(64, 100.0), (64, 120.0)]), None);
        assert_eq!(fit_line(&[]), None);
        assert_eq!(fit_line(&[(4, 0.0), (64, 100.0)]), None);
    }
}
