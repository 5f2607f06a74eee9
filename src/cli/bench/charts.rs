//! `--report DIR`: `report.md` (the tables, the goals, the conditions) and one SVG chart per table,
//! drawn with plotters' SVG backend only. No system fonts are read: plotters writes labels as SVG
//! `<text>` elements and the viewer renders them.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde_json::Value;

use super::{median, Goal, Report};

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
            "## Goals\n\n| goal | value | target | verdict | figure |\n|---|---:|---:|---|---|"
        )?;
        for g in goals {
            let verdict = match g.met() {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "not measured",
            };
            let value = g.value.map_or("-".into(), |v| format!("{v:.2}"));
            writeln!(
                md,
                "| {} | {value} | {} | {verdict} | {} |",
                g.name, g.target, g.figure
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

/// Horizontal bars per klog row: klog / limit, and klog / Kafka where Kafka was measured.
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
    let max = bars
        .iter()
        .flat_map(|(_, a, b)| [Some(*a), *b])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(1.0f64, f64::max)
        * 1.1;
    let height = 80 + 40 * bars.len().max(1) as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let (label_area, plot) = root.split_horizontally(330);
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
    for (i, (_, limit, kafka)) in bars.iter().enumerate() {
        let y = n - i as f64;
        if limit.is_finite() {
            chart
                .draw_series([Rectangle::new(
                    [(0.0, y - 0.45), (*limit, y - 0.05)],
                    KLOG.filled(),
                )])
                .map_err(plot_err)?;
        }
        if let Some(k) = kafka.filter(|k| k.is_finite()) {
            chart
                .draw_series([Rectangle::new(
                    [(0.0, y - 0.95), (k, y - 0.55)],
                    KAFKA.filled(),
                )])
                .map_err(plot_err)?;
        }
    }
    chart
        .draw_series([PathElement::new(vec![(1.0, 0.0), (1.0, n)], BLACK)])
        .map_err(plot_err)?;
    // Row labels, left of the plot, at the height of each pair of bars.
    let plot_top = 10 + 16 + 10;
    let plot_height = height as i32 - plot_top - 10 - 30;
    for (i, (label, limit, kafka)) in bars.iter().enumerate() {
        let y = plot_top + ((i as f64 + 0.5) / n * plot_height as f64) as i32;
        let text = match kafka {
            Some(k) => format!("{label}: {limit:.2} / {k:.2}"),
            None => format!("{label}: {limit:.2}"),
        };
        label_area
            .draw_text(
                &text,
                &("sans-serif", 12).into_text_style(&label_area),
                (5, y),
            )
            .map_err(plot_err)?;
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e:?}")
}
