//! The report's plots, written as SVG and PNG: line plots (optionally log-scale x) and grouped
//! bars. PNG text uses a font embedded in the binary, so no system font is needed.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

/// One line of a line plot: its name and its points.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot.
pub struct LinePlot<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// A log-2 scale x axis (x values are positive).
    pub log_x: bool,
    pub series: Vec<Series>,
}

/// Grouped bars: one group per category, one bar per series in each.
pub struct BarPlot<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub categories: Vec<String>,
    /// Series name, and one value per category.
    pub series: Vec<(String, Vec<f64>)>,
}

const SIZE: (u32, u32) = (900, 540);
const FONT: &str = "sans-serif";

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        // A font that fails to load only costs the PNGs their text; the SVGs do not need it.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, bytes);
    });
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// A plot that can draw itself on any backend.
pub trait Plot {
    /// Draws the plot on `area`.
    fn draw<DB: DrawingBackend>(&self, area: DrawingArea<DB, Shift>) -> Result<(), String>;
}

impl Plot for LinePlot<'_> {
    fn draw<DB: DrawingBackend>(&self, area: DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_lines(area, self)
    }
}

impl Plot for BarPlot<'_> {
    fn draw<DB: DrawingBackend>(&self, area: DrawingArea<DB, Shift>) -> Result<(), String> {
        draw_bars(area, self)
    }
}

/// Writes `stem.svg` and `stem.png` in `dir`; returns the two file names.
pub fn write(dir: &Path, stem: &str, plot: &impl Plot) -> Result<[String; 2], String> {
    register_font();
    let svg = format!("{stem}.svg");
    let png = format!("{stem}.png");
    plot.draw(SVGBackend::new(&dir.join(&svg), SIZE).into_drawing_area())?;
    plot.draw(BitMapBackend::new(&dir.join(&png), SIZE).into_drawing_area())?;
    Ok([svg, png])
}

/// The series' names and colours, boxed in the upper right corner.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())
}

fn draw_lines<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    plot: &LinePlot<'_>,
) -> Result<(), String> {
    let error = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(error)?;
    let points = plot.series.iter().flat_map(|s| s.points.iter());
    let (mut x_min, mut x_max, mut y_max) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    if x_min > x_max {
        return Err(format!("{}: no points", plot.title));
    }
    let y_range = 0.0..y_max * 1.1 + f64::MIN_POSITIVE;
    let mut builder = ChartBuilder::on(&area);
    builder
        .caption(plot.title, (FONT, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    // A log-scale x axis is drawn as log2(x) on a linear axis, labelled at powers of 2 with
    // their values (1K, 2K, …, 1M; 1, 2, 4, … threads).
    let transform = |x: f64| if plot.log_x { x.log2() } else { x };
    let (x_min, x_max) = (transform(x_min), transform(x_max));
    let mut chart = builder
        .build_cartesian_2d(x_min..x_max + f64::EPSILON, y_range)
        .map_err(error)?;
    let log_x = plot.log_x;
    let label = move |x: &f64| {
        if !log_x {
            return format!("{x}");
        }
        let power = x.round();
        if (x - power).abs() < 1e-6 {
            format_x(2f64.powf(power))
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_desc(plot.x_label)
        .y_desc(plot.y_label)
        .x_labels(if log_x {
            (x_max - x_min) as usize + 1
        } else {
            10
        })
        .x_label_formatter(&label)
        .label_style((FONT, 14))
        .draw()
        .map_err(error)?;
    for (index, series) in plot.series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let points: Vec<(f64, f64)> = series
            .points
            .iter()
            .map(|&(x, y)| (transform(x), y))
            .collect();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(error)?
            .label(series.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&point| Circle::new(point, 3, color.filled())),
            )
            .map_err(error)?;
    }
    draw_legend(&mut chart)?;
    area.present().map_err(error)
}

/// Axis labels for powers of 2: 1, 2, …, 512, 1K, …, 1M.
fn format_x(x: f64) -> String {
    let x = x.round() as u64;
    match x {
        x if x >= 1 << 20 => format!("{}M", x >> 20),
        x if x >= 1 << 10 => format!("{}K", x >> 10),
        x => x.to_string(),
    }
}

fn draw_bars<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    plot: &BarPlot<'_>,
) -> Result<(), String> {
    let error = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    area.fill(&WHITE).map_err(error)?;
    let groups = plot.categories.len();
    let bars = plot.series.len().max(1);
    let y_max = plot
        .series
        .iter()
        .flat_map(|(_, values)| values.iter().copied())
        .fold(0.0f64, f64::max);
    let mut chart = ChartBuilder::on(&area)
        .caption(plot.title, (FONT, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..groups as f64, 0.0..y_max * 1.15 + f64::MIN_POSITIVE)
        .map_err(error)?;
    let categories = plot.categories.clone();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups * 2 + 1)
        .x_label_formatter(&|x| {
            let position = x - x.floor();
            let index = x.floor() as usize;
            if (position - 0.5).abs() < 0.01 {
                categories.get(index).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(plot.y_label)
        .label_style((FONT, 14))
        .draw()
        .map_err(error)?;
    let width = 0.8 / bars as f64;
    for (index, (name, values)) in plot.series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        chart
            .draw_series(values.iter().enumerate().map(|(group, &value)| {
                let left = group as f64 + 0.1 + index as f64 * width;
                Rectangle::new([(left, 0.0), (left + width, value)], color.filled())
            }))
            .map_err(error)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled()));
    }
    draw_legend(&mut chart)?;
    area.present().map_err(error)
}
