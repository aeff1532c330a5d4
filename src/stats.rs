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

/// The slope of `ys` over their indices 0, 1, 2, …: the median of the slopes between
/// every pair of points (Theil–Sen), so that a few outliers — the slow first tokens of a
/// cold run, while kernels compile and weights page in — do not tip a flat line (least
/// squares read −4,700 ms per 100 tokens from 16 tokens of a first run on a GPU, where
/// every token after the first few took the same time). `None` for fewer than three
/// points (two points are a line through noise).
pub fn slope(ys: &[f64]) -> Option<f64> {
    if ys.len() < 3 {
        return None;
    }
    let mut slopes = Vec::with_capacity(ys.len() * (ys.len() - 1) / 2);
    for (i, a) in ys.iter().enumerate() {
        for (j, b) in ys.iter().enumerate().skip(i + 1) {
            slopes.push((b - a) / (j - i) as f64);
        }
    }
    Some(median(&slopes))
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

/// The least-squares plane y = a + b₁ x₁ + b₂ x₂ through the points (x₁, x₂, y):
/// (a, b₁, b₂). `None` for fewer than four points (three fit any plane exactly) or when
/// x₁ and x₂ do not vary independently.
pub fn least_squares_plane(points: &[(f64, f64, f64)]) -> Option<(f64, f64, f64)> {
    if points.len() < 4 {
        return None;
    }
    let n = points.len() as f64;
    let mean = |f: fn(&(f64, f64, f64)) -> f64| points.iter().map(f).sum::<f64>() / n;
    let (m1, m2, my) = (mean(|p| p.0), mean(|p| p.1), mean(|p| p.2));
    // The normal equations of the centred points, solved by Cramer's rule.
    let (mut s11, mut s12, mut s22, mut s1y, mut s2y) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x1, x2, y) in points {
        let (d1, d2, dy) = (x1 - m1, x2 - m2, y - my);
        s11 += d1 * d1;
        s12 += d1 * d2;
        s22 += d2 * d2;
        s1y += d1 * dy;
        s2y += d2 * dy;
    }
    let det = s11 * s22 - s12 * s12;
    if det.abs() <= 1e-12 * (s11 * s22).max(f64::MIN_POSITIVE) {
        return None;
    }
    let b1 = (s1y * s22 - s2y * s12) / det;
    let b2 = (s2y * s11 - s1y * s12) / det;
    Some((my - b1 * m1 - b2 * m2, b1, b2))
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
        // A flat line with noise around it: the pairwise slopes −2, 0, 0, 2/3, 2, 2.
        let noisy = slope(&[9.0, 11.0, 9.0, 11.0]).unwrap();
        assert!((noisy - 1.0 / 3.0).abs() < 1e-12, "{noisy}");
        assert_eq!(slope(&[1.0, 2.0]), None);
        // A cold start: three slow tokens, then a flat 4 ms. Least squares reads a steep
        // fall; the median of the pairwise slopes reads flat.
        let mut cold = vec![400.0, 120.0, 30.0];
        cold.extend([4.0; 13]);
        assert_eq!(slope(&cold), Some(0.0));
        // A real growth (the cache-less loop) is kept whole under the same noise.
        let growing: Vec<f64> = (0..16)
            .map(|i| if i < 2 { 300.0 } else { 10.0 + 3.0 * i as f64 })
            .collect();
        assert_eq!(slope(&growing), Some(3.0));
    }

    #[test]
    fn a_line_is_recovered() {
        let (a, b) = least_squares(&[(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]);
        assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_plane_through_exact_points_is_found_and_a_degenerate_one_is_not() {
        let plane = |x1: f64, x2: f64| 1.5 - 2.0 * x1 + 0.25 * x2;
        let points: Vec<_> = [(1.0, 3.0), (2.0, 1.0), (4.0, 7.0), (5.0, 2.0), (3.0, 9.0)]
            .iter()
            .map(|&(a, b)| (a, b, plane(a, b)))
            .collect();
        let (a, b1, b2) = least_squares_plane(&points).unwrap();
        assert!((a - 1.5).abs() < 1e-9 && (b1 + 2.0).abs() < 1e-9 && (b2 - 0.25).abs() < 1e-9);
        assert_eq!(least_squares_plane(&points[..3]), None);
        let collinear: Vec<_> = (0..5).map(|i| (i as f64, 2.0 * i as f64, 1.0)).collect();
        assert_eq!(least_squares_plane(&collinear), None);
    }
}
