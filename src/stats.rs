//! Small statistics shared by checks, progress and benchmarks.

/// The median of a list; `NaN` for an empty one.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// The least-squares slope of `ys` over their indices 0, 1, 2, …; `None` for fewer
/// than three points (two points are a line through noise).
pub fn slope(ys: &[f64]) -> Option<f64> {
    if ys.len() < 3 {
        return None;
    }
    let n = ys.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = ys.iter().sum::<f64>() / n;
    let (mut covariance, mut variance) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mean_x;
        covariance += dx * (y - mean_y);
        variance += dx * dx;
    }
    Some(covariance / variance)
}

/// The least-squares line y = a + b x through the points: (a, b). One point gives a
/// flat line through it; points that share one x give slope 0.
pub fn least_squares(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.len() < 2 {
        return (points.first().map_or(0.0, |p| p.1), 0.0);
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - b * mx, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_empty_lists() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn slopes_by_hand() {
        // y = 2x + 1 exactly.
        assert_eq!(slope(&[1.0, 3.0, 5.0, 7.0]), Some(2.0));
        // A flat line with noise around it: (−1, +1, −1, +1) over x = 0..3 gives 0.4.
        let noisy = slope(&[9.0, 11.0, 9.0, 11.0]).unwrap();
        assert!((noisy - 0.4).abs() < 1e-12, "{noisy}");
        assert_eq!(slope(&[1.0, 2.0]), None);
    }

    #[test]
    fn a_line_is_recovered() {
        let (a, b) = least_squares(&[(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]);
        assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12);
    }
}
