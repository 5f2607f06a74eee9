//! `--report DIR`: `report.md` (the tables, the goals, the conditions) and one SVG chart per table,
//! drawn with plotters' SVG backend only. No system fonts are read: plotters writes labels as SVG
//! `<text>` elements and the viewer renders them.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use super::goals::Goal;
use super::{median, Report};

const KLOG: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const KAFKA: RGBColor = RGBColor(0xff, 0x7f, 0x0e);

pub(super) fn write_report(
    dir: &Path,
    doc: &Value,
    reports: &[Report],
    goals: &[Goal],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut md = String::new();
    writeln!(md, "# klog bench report\n")?;
    let c = &doc["conditions"];
    writeln!(
        md,
        "Machine: {} ({} CPUs), kernel {}. Rounds: {}. Backends: {}. Kafka: {}.\n",
        c["machine"]["cpu"].as_str().unwrap_or("?"),
        c["machine"]["cpus"],
        c["machine"]["kernel"].as_str().unwrap_or("?"),
        c["rounds"],
        c["backends"],
        c["kafka"]["status"].as_str().unwrap_or("?"),
    )?;
    writeln!(
        md,
        "Every ratio is a throughput ratio (higher is faster for klog). klog / limit is the median of \
         per-round ratios to a baseline measured in the same rounds; klog / Kafka is the ratio of the \
         medians of the same invocation. In the charts, blue bars are klog / limit, orange bars klog / \
         Kafka, and the line marks 1.\n"
    )?;
    if !goals.is_empty() {
        writeln!(
            md,
            "## Goals\n\n| goal | value | target | ceiling | verdict | figure |\n|---|---:|---:|---:|---|---|"
        )?;
        for g in goals {
            let verdict = match g.verdict() {
                "missed" => "**missed**",
                v => v,
            };
            let value = g.value.map_or("-".into(), |v| format!("{v:.2}"));
            writeln!(
                md,
                "| {} | {value} | {} | {} | {verdict} | {} |",
                g.name,
                g.target_text(),
                g.ceiling_text(),
                g.figure
            )?;
        }
        writeln!(md)?;
    }
    for (i, r) in reports.iter().enumerate() {
        let svg = format!("{:02}-{}.svg", i + 1, r.key.replace('/', "-"));
        chart(&dir.join(&svg), r)?;
        writeln!(md, "## `{}`\n\n{}\n", r.key, r.title)?;
        writeln!(
            md,
            "| what | backend | {} | klog / limit | klog / Kafka |\n|---|---|---:|---:|---:|",
            r.unit
        )?;
        writeln!(
            md,
            "| limit: {} | - | {:.1} | 1.00 | |",
            r.baseline_name,
            r.baseline.median()
        )?;
        match &r.kafka {
            super::Kafka::Measured {
                what,
                series,
                version,
                ..
            } => writeln!(
                md,
                "| Kafka {version}: {what} | jvm | {:.1} | {:.2} | 1.00 |",
                series.median(),
                series.median() / r.baseline.median()
            )?,
            super::Kafka::Absent(why) | super::Kafka::Failed(why) => {
                writeln!(md, "| Kafka: not measured ({why}) | | | | |")?
            }
            super::Kafka::NotMeasured => {}
        }
        for row in &r.rows {
            if let Some(b) = &row.bound {
                writeln!(
                    md,
                    "| limit: {} | {} | {:.1} | 1.00 | |",
                    b.name,
                    row.backend,
                    b.series.median()
                )?;
            }
            writeln!(
                md,
                "| {} | {} | {:.1} | {:.2} | {} |",
                row.name,
                row.backend,
                row.series.median(),
                median(&row.ratios(&r.baseline)),
                row.kafka
                    .as_ref()
                    .unwrap_or(&r.kafka)
                    .cell(row.series.median())
            )?;
        }
        for (name, v) in &r.comparisons {
            writeln!(md, "\nratio {name}: {:.2}", median(v))?;
        }
        writeln!(md, "\n![{}]({svg})\n", r.key)?;
    }
    std::fs::write(dir.join("report.md"), md)?;
    std::fs::write(
        dir.join("bench.json"),
        serde_json::to_string_pretty(doc)? + "\n",
    )?;
    Ok(())
}

/// Horizontal bars per klog row: klog / limit, and klog / Kafka where Kafka was measured. A legend at
/// the top left names the colours; each row's name sits left of its pair of bars, at their height, and
/// each bar's value just past its end.
fn chart(path: &Path, r: &Report) -> anyhow::Result<()> {
    let bars: Vec<(String, f64, Option<f64>)> = r
        .rows
        .iter()
        .map(|row| {
            let label = if row.backend == "-" {
                row.name.clone()
            } else {
                format!("{} ({})", row.name, row.backend)
            };
            let limit = median(&row.ratios(&r.baseline));
            let kafka = row
                .kafka
                .as_ref()
                .unwrap_or(&r.kafka)
                .median()
                .map(|k| row.series.median() / k);
            (label, limit, kafka)
        })
        .collect();
    // Room past the longest bar for its value.
    let max = bars
        .iter()
        .flat_map(|(_, a, b)| [Some(*a), *b])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max)
        * 1.2;
    let height = 80 + 40 * bars.len().max(1) as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let with_kafka = bars.iter().any(|(_, _, k)| k.is_some_and(f64::is_finite));
    legend(&root, with_kafka)?;
    let (_, plot) = root.split_horizontally(LABEL_AREA_WIDTH);
    let n = bars.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&plot)
        .caption(format!("{} ({})", r.key, r.unit), ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .build_cartesian_2d(0f64..max, 0f64..n)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .disable_y_axis()
        .x_desc("ratio (1 = same speed)")
        .draw()
        .map_err(plot_err)?;
    let value_style = ("sans-serif", 11)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (_, limit, kafka)) in bars.iter().enumerate() {
        let y = n - i as f64;
        let mut draw_bar = |value: f64, (low, high): (f64, f64), colour: RGBColor| {
            chart
                .draw_series([Rectangle::new(
                    [(0.0, y - high), (value, y - low)],
                    colour.filled(),
                )])
                .map_err(plot_err)?;
            let beside = EmptyElement::at((value, y - (low + high) / 2.0))
                + Text::new(format!("{value:.2}"), (4, 0), value_style.clone());
            chart.draw_series([beside]).map_err(plot_err)?;
            Ok::<(), anyhow::Error>(())
        };
        if limit.is_finite() {
            draw_bar(*limit, (0.05, 0.45), KLOG)?;
        }
        if let Some(k) = kafka.filter(|k| k.is_finite()) {
            draw_bar(k, (0.55, 0.95), KAFKA)?;
        }
    }
    chart
        .draw_series([PathElement::new(vec![(1.0, 0.0), (1.0, n)], BLACK)])
        .map_err(plot_err)?;
    // Row names, right-aligned against the plot, at the middle of each pair of bars (the chart's own
    // mapping from row to pixel, not an estimate of the plot area's position).
    let name_style = ("sans-serif", 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, (label, _, _)) in bars.iter().enumerate() {
        let (_, y) = chart.backend_coord(&(0.0, n - i as f64 - 0.5));
        root.draw_text(label, &name_style, (LABEL_AREA_WIDTH as i32 - 5, y))
            .map_err(plot_err)?;
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

/// Width of the area left of the plot that holds the legend and the row names.
const LABEL_AREA_WIDTH: u32 = 330;

/// The legend, top left: a swatch per colour and what its bars measure.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    with_kafka: bool,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let mut entries = vec![(KLOG, "klog / limit (the machine's bound, same rounds)")];
    if with_kafka {
        entries.push((KAFKA, "klog / Kafka (Kafka's own code)"));
    }
    let style = ("sans-serif", 11)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (colour, text)) in entries.into_iter().enumerate() {
        let y = 10 + 16 * i as i32;
        area.draw(&Rectangle::new([(5, y - 5), (17, y + 5)], colour.filled()))
            .map_err(plot_err)?;
        area.draw_text(text, &style, (22, y)).map_err(plot_err)?;
    }
    Ok(())
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e:?}")
}

#[cfg(test)]
mod tests {
    use super::super::{Bound, Kafka, Report, Row, Series};
    use super::*;

    /// The value of attribute `name` in one SVG element's text.
    fn attr(element: &str, name: &str) -> Option<f64> {
        let start = element.find(&format!(" {name}=\""))? + name.len() + 3;
        let end = start + element[start..].find('"')?;
        element[start..end].parse().ok()
    }

    /// Every `<rect>` of `fill` left of (legend swatches) or in (bars) the plot: (top, bottom) in pixels.
    fn rects(svg: &str, fill: &str, in_plot: bool) -> Vec<(f64, f64)> {
        svg.split("<rect")
            .skip(1)
            .filter(|e| e.contains(&format!("fill=\"{fill}\"")))
            .filter(|e| attr(e, "x").is_some_and(|x| (x >= LABEL_AREA_WIDTH as f64) == in_plot))
            .filter_map(|e| Some((attr(e, "y")?, attr(e, "y")? + attr(e, "height")?)))
            .collect()
    }

    /// The visual middle (pixels) of the `<text>` whose content starts with `prefix`: its anchor `y`
    /// moved by `dy` to the baseline, then up by about a third of the font size (the middle of lowercase
    /// and capital letters).
    fn text_y(svg: &str, prefix: &str) -> Option<f64> {
        svg.split("<text")
            .skip(1)
            .find(|e| {
                e.split_once('>')
                    .is_some_and(|(_, t)| t.trim_start().starts_with(prefix))
            })
            .and_then(|e| {
                let size = attr(e, "font-size")?;
                let dy = e
                    .split_once(" dy=\"")
                    .map_or("0", |(_, r)| r.split('"').next().unwrap_or("0"));
                let dy = if let Some(em) = dy.strip_suffix("em") {
                    em.parse::<f64>().ok()? * size
                } else if let Some(ex) = dy.strip_suffix("ex") {
                    ex.parse::<f64>().ok()? * size / 2.0
                } else {
                    dy.parse().ok()?
                };
                Some(attr(e, "y")? + dy - 0.35 * size)
            })
    }

    fn series(runs: &[f64]) -> Series {
        Series {
            runs: runs.to_vec(),
        }
    }

    #[test]
    fn the_chart_has_a_legend_and_each_label_beside_its_bars() {
        let mut r = Report::new("append", "append".into(), "MB/s");
        r.baseline = series(&[100.0, 100.0]);
        for (name, v) in [("row-a", 90.0), ("row-b", 50.0), ("row-c", 120.0)] {
            r.rows.push(Row {
                name: name.into(),
                backend: "std",
                series: series(&[v, v]),
                bound: None::<Bound>,
                kafka: None,
            });
        }
        r.kafka = Kafka::Measured {
            what: "UnifiedLog.append".into(),
            version: "4.1.0".into(),
            warmup_rounds: 0,
            series: series(&[80.0, 80.0]),
            details: Value::Null,
        };
        let dir = std::env::temp_dir().join(format!("klog-chart-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chart.svg");
        chart(&path, &r).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();

        // The legend names both colours, each beside a swatch of its colour.
        for (fill, name) in [("#1F77B4", "klog / limit"), ("#FF7F0E", "klog / Kafka")] {
            let y = text_y(&svg, name).unwrap_or_else(|| panic!("no legend entry {name:?}: {svg}"));
            assert!(
                rects(&svg, fill, false)
                    .iter()
                    .any(|(top, bottom)| (top - 2.0..=bottom + 2.0).contains(&y)),
                "no {fill} swatch beside the legend entry {name:?}"
            );
        }
        // Row i's label is at the middle of its own pair of bars (blue row i above orange row i), not
        // below it.
        let blue = rects(&svg, "#1F77B4", true);
        let orange = rects(&svg, "#FF7F0E", true);
        for (i, name) in ["row-a", "row-b", "row-c"].iter().enumerate() {
            let y = text_y(&svg, name).unwrap_or_else(|| panic!("no label {name}"));
            let (top, bottom) = (orange[i].0.min(blue[i].0), orange[i].1.max(blue[i].1));
            let middle = (top + bottom) / 2.0;
            assert!(
                (y - middle).abs() <= 3.0,
                "label {name} centred at y={y:.1}, its bars span {top}..{bottom}"
            );
        }
    }
}
