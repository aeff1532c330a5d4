//! quest's own SVG plots of what the progress file records: no script, no remote asset.
//! Every label sits inside the picture (the margins are sized for them) and every bar
//! inside its axes (the scale starts at zero and ends above the largest value).

use std::fmt::Write;

use unicode_width::UnicodeWidthStr;

use super::markup::escape;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 260.0;
/// Room for the y tick labels and the rotated y label.
const LEFT: f64 = 76.0;
const RIGHT: f64 = 20.0;
/// Room for the legend.
const TOP: f64 = 34.0;
/// Room for the x tick labels and the x label.
const BOTTOM: f64 = 46.0;
const FONT: f64 = 12.0;

/// The colours of the two codes a measurement compares, and of anything else.
pub const BEFORE: &str = "#8a94a6";
pub const AFTER: &str = "#2f6fdb";
pub const OTHER: &str = "#d9822b";

/// One named line of points (x, y), drawn in `color`.
pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub points: Vec<(f64, f64)>,
}

/// Words on a plot, in the reader's language.
pub struct Labels<'a> {
    pub x: &'a str,
    pub y: &'a str,
    /// What the picture shows, for screen readers.
    pub title: &'a str,
}

/// A line plot of runs: x is the run's number (1, 2, …), y starts at zero.
pub fn line_plot(series: &[Series], labels: &Labels) -> String {
    let max_x = series
        .iter()
        .flat_map(|s| &s.points)
        .map(|p| p.0)
        .fold(1.0, f64::max);
    let max_y = series
        .iter()
        .flat_map(|s| &s.points)
        .map(|p| p.1)
        .fold(0.0, f64::max);
    let axes = Axes::new(max_y);
    // Points keep clear of the axes; one point alone sits in the middle.
    let pad = 16.0;
    let x_of = |x: f64| {
        if max_x <= 1.0 {
            LEFT + axes.plot_width() / 2.0
        } else {
            LEFT + pad + (x - 1.0) / (max_x - 1.0) * (axes.plot_width() - 2.0 * pad)
        }
    };
    let mut svg = open(labels);
    axes.draw_y(&mut svg);
    // Integer run numbers, at most about ten of them.
    let step = ((max_x / 10.0).ceil() as usize).max(1);
    for n in (1..=max_x as usize).step_by(step) {
        let x = x_of(n as f64);
        tick_x(&mut svg, x, &n.to_string());
    }
    for s in series {
        let path: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", x_of(x), axes.y_of(y)))
            .collect();
        if path.len() > 1 {
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
                s.color,
                path.join(" ")
            );
        }
        for &(x, y) in &s.points {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"><title>{}</title></circle>"#,
                x_of(x),
                axes.y_of(y),
                s.color,
                escape(&format!("{} #{}: {}", s.name, x, number(y)))
            );
        }
    }
    let legend: Vec<(&str, &str)> = series.iter().map(|s| (s.name.as_str(), s.color)).collect();
    close(svg, labels, &legend)
}

/// Before and after, round by round (one bar each), with each side's median as a dashed
/// line across the plot.
pub fn rounds_plot(before: &[f64], after: &[f64], names: (&str, &str), labels: &Labels) -> String {
    let rounds = before.len().max(after.len()).max(1);
    let max_y = before.iter().chain(after).copied().fold(0.0, f64::max);
    let axes = Axes::new(max_y);
    let mut svg = open(labels);
    axes.draw_y(&mut svg);
    let slot = axes.plot_width() / rounds as f64;
    let bar = (slot * 0.36).min(40.0);
    for round in 0..rounds {
        let centre = LEFT + slot * (round as f64 + 0.5);
        tick_x(&mut svg, centre, &(round + 1).to_string());
        for (values, color, offset, name) in [
            (before, BEFORE, -bar, names.0),
            (after, AFTER, 0.0, names.1),
        ] {
            let Some(&value) = values.get(round) else {
                continue;
            };
            let top = axes.y_of(value);
            let _ = write!(
                svg,
                r#"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}</title></rect>"#,
                centre + offset + 1.0,
                bar - 2.0,
                (axes.y_of(0.0) - top).max(0.0),
                escape(&format!("{name} {}: {}", round + 1, number(value)))
            );
        }
    }
    for (values, color) in [(before, BEFORE), (after, AFTER)] {
        if values.is_empty() {
            continue;
        }
        let y = axes.y_of(crate::stats::median(values));
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4"/>"#,
            WIDTH - RIGHT
        );
    }
    close(svg, labels, &[(names.0, BEFORE), (names.1, AFTER)])
}

/// Horizontal bars, one per named value (a card's before and after), each with its value
/// written after it; the longest bar takes three quarters of the width, so its number fits.
pub fn value_bars(rows: &[(String, f64, &'static str)], unit: &str, title: &str) -> String {
    const ROW: f64 = 34.0;
    let name_width = rows
        .iter()
        .map(|(name, ..)| text_width(name))
        .fold(0.0, f64::max)
        + 16.0;
    let height = ROW * rows.len() as f64 + 16.0;
    let room = (WIDTH - name_width - RIGHT) * 0.75;
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" class="plot" role="img" font-family="sans-serif" font-size="{FONT}"><title>{}</title>"#,
        escape(title)
    );
    for (i, (name, value, color)) in rows.iter().enumerate() {
        let y = 8.0 + ROW * i as f64;
        let length = if max > 0.0 { value / max * room } else { 0.0 };
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><rect x="{name_width:.1}" y="{y:.1}" width="{length:.1}" height="{:.1}" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            name_width - 8.0,
            y + ROW / 2.0,
            escape(name),
            ROW - 10.0,
            name_width + length + 6.0,
            y + ROW / 2.0,
            escape(&format!("{} {unit}", number(*value)))
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A y scale from zero to a round number above `max`, with its ticks.
struct Axes {
    top: f64,
    step: f64,
}

impl Axes {
    fn new(max: f64) -> Axes {
        let max = if max > 0.0 && max.is_finite() {
            max
        } else {
            1.0
        };
        let step = nice_step(max / 4.0);
        // Above the largest value, so no bar or point touches the top.
        let top = ((max / step).floor() + 1.0) * step;
        Axes { top, step }
    }

    fn plot_width(&self) -> f64 {
        WIDTH - LEFT - RIGHT
    }

    fn plot_height(&self) -> f64 {
        HEIGHT - TOP - BOTTOM
    }

    fn y_of(&self, value: f64) -> f64 {
        let value = value.clamp(0.0, self.top);
        TOP + self.plot_height() * (1.0 - value / self.top)
    }

    fn draw_y(&self, svg: &mut String) {
        let ticks = (self.top / self.step).round() as usize;
        for i in 0..=ticks {
            let value = self.step * i as f64;
            let y = self.y_of(value);
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#e3e6eb"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + FONT / 3.0,
                tick_label(value, self.step)
            );
        }
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{:.1}" stroke="#5b6270"/><line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#5b6270"/>"##,
            HEIGHT - BOTTOM,
            WIDTH - RIGHT,
            HEIGHT - BOTTOM,
            HEIGHT - BOTTOM
        );
    }
}

fn open(labels: &Labels) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" class="plot" role="img" font-family="sans-serif" font-size="{FONT}"><title>{}</title>"#,
        escape(labels.title)
    )
}

/// The axis labels and the legend, then the end of the picture.
fn close(mut svg: String, labels: &Labels, legend: &[(&str, &str)]) -> String {
    let plot_middle = LEFT + (WIDTH - LEFT - RIGHT) / 2.0;
    let _ = write!(
        svg,
        r##"<text x="{plot_middle:.1}" y="{:.1}" text-anchor="middle" fill="#39404d">{}</text>"##,
        HEIGHT - 8.0,
        escape(labels.x)
    );
    let y_middle = TOP + (HEIGHT - TOP - BOTTOM) / 2.0;
    let _ = write!(
        svg,
        r##"<text transform="translate(16 {y_middle:.1}) rotate(-90)" text-anchor="middle" fill="#39404d">{}</text>"##,
        escape(&fit(labels.y, HEIGHT - TOP - BOTTOM))
    );
    let mut x = LEFT;
    for (name, color) in legend {
        let name = fit(name, WIDTH - RIGHT - x - 18.0);
        if name.is_empty() {
            break;
        }
        let _ = write!(
            svg,
            r#"<rect x="{x:.1}" y="10" width="12" height="12" fill="{color}"/><text x="{:.1}" y="20">{}</text>"#,
            x + 16.0,
            escape(&name)
        );
        x += 16.0 + text_width(&name) + 20.0;
    }
    svg.push_str("</svg>");
    svg
}

fn tick_x(svg: &mut String, x: f64, label: &str) {
    let y = HEIGHT - BOTTOM;
    let _ = write!(
        svg,
        r##"<line x1="{x:.1}" x2="{x:.1}" y1="{y:.1}" y2="{:.1}" stroke="#5b6270"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
        y + 4.0,
        y + 18.0,
        escape(label)
    );
}

/// About how wide `text` is at the plot's font size (a Hangul syllable counts two).
fn text_width(text: &str) -> f64 {
    UnicodeWidthStr::width(text) as f64 * FONT * 0.58
}

/// `text`, cut with an ellipsis to fit `room`.
fn fit(text: &str, room: f64) -> String {
    if text_width(text) <= room {
        return text.to_owned();
    }
    let mut out = String::new();
    for c in text.chars() {
        if text_width(&format!("{out}{c}…")) > room {
            break;
        }
        out.push(c);
    }
    if out.is_empty() {
        out
    } else {
        out + "…"
    }
}

/// 1, 2 or 5 times a power of ten, at least `rough`.
fn nice_step(rough: f64) -> f64 {
    let power = 10f64.powf(rough.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| *step >= rough)
        .unwrap_or(10.0 * power)
}

fn tick_label(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{value:.decimals$}")
}

/// A measured value as the CLI prints it: three significant figures or so.
pub fn number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(1.6), 2.0);
        assert_eq!(nice_step(30.0), 50.0);
        assert_eq!(nice_step(100.0), 100.0);
    }

    #[test]
    fn the_scale_ends_above_the_largest_value() {
        for max in [0.4, 6.6, 7.99, 10.0, 143.0, 5312.0] {
            let axes = Axes::new(max);
            assert!(axes.top > max, "{max}: top {}", axes.top);
            assert!(axes.y_of(max) > TOP, "{max} touches the top");
        }
    }

    #[test]
    fn bars_stay_inside_their_axes() {
        let svg = rounds_plot(
            &[6.5, 6.7, 6.6],
            &[7.4, 7.6, 7.5],
            ("before", "after"),
            &Labels {
                x: "round",
                y: "tok/s",
                title: "t",
            },
        );
        for rect in svg.split("<rect").skip(1) {
            let rect = &rect[..rect.find('>').unwrap()];
            let attr = |name: &str| -> f64 {
                let at = rect.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                rect[at..rect[at..].find('"').unwrap() + at]
                    .parse()
                    .unwrap()
            };
            if rect.contains("height=\"12\"") {
                continue; // the legend's swatch
            }
            assert!(attr("y") >= TOP && attr("y") + attr("height") <= HEIGHT - BOTTOM + 0.1);
            assert!(attr("x") >= LEFT && attr("x") + attr("width") <= WIDTH - RIGHT);
        }
    }

    #[test]
    fn long_labels_are_cut_to_fit() {
        let long = "a".repeat(400);
        assert!(text_width(&fit(&long, 100.0)) <= 100.0);
        assert_eq!(fit("short", 100.0), "short");
    }

    #[test]
    fn text_is_escaped() {
        let svg = value_bars(&[("<b>".into(), 1.0, AFTER)], "ms", "<t>");
        assert!(!svg.contains("<b>") && !svg.contains("<t>"), "{svg}");
    }
}
