//! The SVG of requests per second against the number of connections.

use std::path::Path;

use plotters::prelude::*;

/// One line of the plot: a server and its (connections, req/s) points.
pub struct Series {
    /// The legend.
    pub name: String,
    /// (connections, requests per second), connections ascending.
    pub points: Vec<(usize, f64)>,
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(0x1b, 0x9e, 0x77),
    RGBColor(0xd9, 0x5f, 0x02),
    RGBColor(0x75, 0x70, 0xb3),
    RGBColor(0xe7, 0x29, 0x8a),
];

/// Draws `series` (connections on a log scale) into an SVG at `path`.
pub fn throughput_svg(path: &Path, title: &str, series: &[Series]) -> Result<(), String> {
    let max_x = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(2) as f64;
    let max_y = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.1;
    // The measured connection counts are the ticks.
    let mut ticks: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0 as f64))
        .collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0.8f64..max_x * 1.25).log_scale().with_key_points(ticks),
            0.0f64..max_y,
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("keep-alive connections (pipeline 1)")
        .y_desc("requests per second")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let points: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x as f64, y)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_series() {
        let dir = std::env::temp_dir().join(format!("loadbench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let path = dir.join("t.svg");
        let series = [
            Series {
                name: "alpha".into(),
                points: vec![(1, 10_000.0), (16, 50_000.0), (256, 40_000.0)],
            },
            Series {
                name: "beta".into(),
                points: vec![(1, 5_000.0), (16, 20_000.0)],
            },
        ];
        throughput_svg(&path, "test", &series).expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("written");
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        assert!(svg.contains("alpha") && svg.contains("beta"));
        std::fs::remove_dir_all(&dir).expect("removed");
    }
}
