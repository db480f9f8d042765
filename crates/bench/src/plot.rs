//! A small SVG line plot of ops/s against workers, one series per target and
//! switch setting. Hand-written: a few dozen lines of SVG do not need a
//! plotting crate.

use serde_json::Value;
use std::collections::BTreeMap;

pub fn svg(rows: &[Value], title: &str) -> String {
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        let sw = &r["switches"];
        let key = if sw.is_null() {
            r["target"].as_str().unwrap_or("?").to_string()
        } else {
            format!(
                "{} {}/{}/{}/{}/{}",
                r["target"].as_str().unwrap_or("?"),
                sw["lock_scope"].as_str().unwrap_or(""),
                sw["dir_index"].as_str().unwrap_or(""),
                sw["name_cache"].as_str().unwrap_or(""),
                sw["placement"].as_str().unwrap_or(""),
                sw["commit"].as_str().unwrap_or("")
            )
        };
        series.entry(key).or_default().push((
            r["workers"].as_f64().unwrap_or(0.0),
            r["ops_per_s"].as_f64().unwrap_or(0.0),
        ));
    }
    let (w, h, l, b) = (760.0, 420.0, 80.0, 50.0);
    let xmax = rows
        .iter()
        .filter_map(|r| r["workers"].as_f64())
        .fold(1.0, f64::max);
    let ymax = rows
        .iter()
        .filter_map(|r| r["ops_per_s"].as_f64())
        .fold(1.0, f64::max)
        * 1.1;
    let sx = |x: f64| l + (x / xmax) * (w - l - 240.0);
    let sy = |y: f64| h - b - (y / ymax) * (h - b - 30.0);
    let colors = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
        "#17becf",
    ];
    let mut s = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='11'>\
         <rect width='100%' height='100%' fill='white'/>\
         <text x='{l}' y='18' font-size='14'>{title}: ops/s by workers</text>\
         <line x1='{l}' y1='{}' x2='{}' y2='{}' stroke='black'/><line x1='{l}' y1='30' x2='{l}' y2='{}' stroke='black'/>",
        h - b, w - 240.0, h - b, h - b
    );
    for i in 0..=4 {
        let y = ymax * i as f64 / 4.0;
        s += &format!(
            "<text x='{}' y='{}' text-anchor='end'>{:.0}</text>",
            l - 6.0,
            sy(y) + 4.0,
            y
        );
    }
    for x in 1..=(xmax as usize) {
        s += &format!(
            "<text x='{}' y='{}' text-anchor='middle'>{x}</text>",
            sx(x as f64),
            h - b + 16.0
        );
    }
    s += &format!(
        "<text x='{}' y='{}' text-anchor='middle'>workers</text>",
        (l + w - 240.0) / 2.0,
        h - 12.0
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = colors[i % colors.len()];
        let mut pts = pts.clone();
        pts.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        let path: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        s += &format!(
            "<polyline fill='none' stroke='{c}' stroke-width='2' points='{}'/>",
            path.join(" ")
        );
        for (x, y) in &pts {
            s += &format!(
                "<circle cx='{:.1}' cy='{:.1}' r='3' fill='{c}'/>",
                sx(*x),
                sy(*y)
            );
        }
        s += &format!(
            "<rect x='{}' y='{}' width='10' height='10' fill='{c}'/><text x='{}' y='{}'>{}</text>",
            w - 230.0,
            30.0 + i as f64 * 16.0,
            w - 215.0,
            39.0 + i as f64 * 16.0,
            name.replace('<', "&lt;")
        );
    }
    s + "</svg>\n"
}
