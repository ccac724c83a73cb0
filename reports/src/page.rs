//! One HTML page: headings, notes, plotly charts and tables, with plotly.js inlined once.
//!
//! The page is written to a temporary file in the output's directory and renamed into place,
//! so a reader (or a failed run) never sees half a report.

use std::fmt::Write as _;
use std::path::Path;

use plotly::layout::{Layout, Margin};
use plotly::{Configuration, Plot};

use aorta_ingest::classify::Category;

use crate::error::ReportError;

/// Category colors shared by every chart, so `comm` is the same red on the timeline and in the
/// breakdown.
pub(crate) fn category_color(category: &str) -> &'static str {
    match Category::parse(category) {
        Some(Category::Comm) => "#d62728",
        Some(Category::Gemm) => "#1f77b4",
        Some(Category::Attention) => "#9467bd",
        Some(Category::OtherCompute) => "#2ca02c",
        Some(Category::Memcpy) => "#ff7f0e",
        Some(Category::Memset) => "#8c8c8c",
        None => "#17becf",
    }
}

/// A chart layout of `height` px with tight margins (the default leaves 100 px above).
pub(crate) fn layout(height: usize) -> Layout {
    Layout::new()
        .height(height)
        .margin(Margin::new().top(30).bottom(60).left(70).right(30))
}

/// A legend above the plot area, in rows, for charts with many series (one per run and
/// rank): a legend on the right would cover the right axis and squeeze the plot. Returns
/// the legend and the top margin it needs.
pub(crate) fn legend_on_top(series: usize) -> (plotly::layout::Legend, usize) {
    use plotly::common::{Anchor, Orientation};
    let rows = series.div_ceil(4);
    let legend = plotly::layout::Legend::new()
        .orientation(Orientation::Horizontal)
        .x(0.0)
        .y(1.02)
        .y_anchor(Anchor::Bottom);
    (legend, 30 + 22 * rows)
}

/// Escapes text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// plotly.js only: the crate's offline sources also carry MathJax (2 MB), which no chart here
/// uses.
fn plotly_js() -> String {
    let all = Plot::offline_js_sources();
    let end = all
        .find("</script>")
        .map_or(all.len(), |i| i + "</script>".len());
    all[..end].to_string()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1300px;\
padding:0 16px;box-sizing:border-box;color:#222}h1{font-size:1.5em}h2{font-size:1.2em;\
margin-top:2em;border-bottom:1px solid #ddd}h3{font-size:1.05em;margin:1em 0 .3em}\
table{border-collapse:collapse;font-size:13px;margin:8px 0;display:block;max-width:100%;\
overflow-x:auto}td,th{border:1px solid #ddd;\
padding:3px 8px}td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f4f4f4}\
p.note{color:#555;font-size:13px}p.bad{color:#b00000;font-weight:600;font-size:15px}\
p.good{color:#1a7f37;font-weight:600;font-size:15px}.chart{margin:8px 0}\
.row{display:grid;grid-template-columns:1fr 1fr;gap:16px}.row>.chart{min-width:0}\
details>summary{cursor:pointer;font-size:13px;color:#333;margin:6px 0}\
.headline{background:#f7f9fc;border:1px solid #d8e0ec;border-radius:6px;padding:4px 16px;\
margin:12px 0}.headline ul{margin:4px 0 8px;padding-left:20px}.headline li{margin:4px 0;\
font-size:15px;line-height:1.4}.headline a{font-size:13px;margin-left:4px}";

/// Tables with more rows than this collapse behind a summary line (`<details>`), so a long
/// table (84 JSONL iterations, 8 ranks × 50 steps) does not push the charts below it off the
/// first screens.
pub(crate) const OPEN_ROWS: usize = 20;

#[derive(Default)]
pub(crate) struct Page {
    title: String,
    body: String,
    plots: usize,
}

impl Page {
    pub(crate) fn new(title: &str) -> Page {
        let mut p = Page {
            title: title.to_string(),
            ..Page::default()
        };
        let _ = writeln!(p.body, "<h1>{}</h1>", esc(title));
        p
    }

    pub(crate) fn section(&mut self, heading: &str) {
        let _ = writeln!(self.body, "<h2>{}</h2>", esc(heading));
    }

    /// A section heading the headline links to (`#id`).
    pub(crate) fn section_id(&mut self, heading: &str, id: &str) {
        let _ = writeln!(self.body, "<h2 id=\"{}\">{}</h2>", esc(id), esc(heading));
    }

    /// A sub-heading (one run's part of a section) the headline links to (`#id`).
    pub(crate) fn subsection_id(&mut self, heading: &str, id: &str) {
        let _ = writeln!(self.body, "<h3 id=\"{}\">{}</h3>", esc(id), esc(heading));
    }

    /// HTML the caller built and escaped itself (the headline's linked verdicts).
    pub(crate) fn raw(&mut self, html: &str) {
        self.body.push_str(html);
    }

    /// A paragraph of explanatory text.
    pub(crate) fn note(&mut self, text: &str) {
        let _ = writeln!(self.body, "<p class=\"note\">{}</p>", esc(text));
    }

    /// A verdict line: green when `ok`, red and bold when not.
    pub(crate) fn verdict(&mut self, ok: bool, text: &str) {
        let class = if ok { "good" } else { "bad" };
        let _ = writeln!(self.body, "<p class=\"{class}\">{}</p>", esc(text));
    }

    /// A chart; its height comes from its layout.
    pub(crate) fn plot(&mut self, plot: &mut Plot) {
        plot.set_configuration(Configuration::new().display_logo(false).responsive(true));
        self.plots += 1;
        let id = format!("plot-{}", self.plots);
        let _ = writeln!(
            self.body,
            "<div class=\"chart\">{}</div>",
            plot.to_inline_html(Some(&id))
        );
    }

    /// A chart given as plotly.js JSON (`{data, layout}`), for attributes the typed plotly
    /// crate lacks (axis automargin, error bars on raw traces); written as the typed charts
    /// are.
    pub(crate) fn plot_json(&mut self, mut plot: serde_json::Value) {
        plot["config"] = serde_json::json!({"displaylogo": false, "responsive": true});
        self.plots += 1;
        // As the plotly crate's template: `<`, `>`, `&` and `'` escaped inside the script.
        let js = plot
            .to_string()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\'', "\\u0027");
        let _ = writeln!(
            self.body,
            "<div class=\"chart\"><div id=\"plot-{n}\" class=\"plotly-graph-div\" \
             style=\"height:100%; width:100%;\"></div>\n<script type=\"text/javascript\">\n    \
             Plotly.newPlot(\"plot-{n}\", {js});\n</script></div>",
            n = self.plots
        );
    }

    /// Charts side by side, sharing the width.
    pub(crate) fn plot_row(&mut self, plots: &mut [Plot]) {
        self.body.push_str("<div class=\"row\">\n");
        for p in plots {
            self.plot(p);
        }
        self.body.push_str("</div>\n");
    }

    /// A table; cells that parse as numbers (or are `-`) are right-aligned. Over
    /// [`OPEN_ROWS`] rows it is collapsed behind a summary line naming its row count and
    /// columns; a table wider than the page scrolls inside it (the style's `overflow-x`).
    pub(crate) fn table(&mut self, header: &[&str], rows: &[Vec<String>]) {
        let collapse = rows.len() > OPEN_ROWS;
        if collapse {
            let _ = writeln!(
                self.body,
                "<details><summary>Table: {} rows ({}); click to show</summary>",
                rows.len(),
                esc(&header.join(", "))
            );
        }
        let mut t = String::from("<table>\n<tr>");
        for h in header {
            let _ = write!(t, "<th>{}</th>", esc(h));
        }
        t.push_str("</tr>\n");
        for r in rows {
            t.push_str("<tr>");
            for c in r {
                let numeric = c == "-" || c.parse::<f64>().is_ok();
                let class = if numeric { " class=\"n\"" } else { "" };
                let _ = write!(t, "<td{class}>{}</td>", esc(c));
            }
            t.push_str("</tr>\n");
        }
        t.push_str("</table>\n");
        self.body.push_str(&t);
        if collapse {
            self.body.push_str("</details>\n");
        }
    }

    /// The number of charts on the page.
    pub(crate) fn plot_count(&self) -> usize {
        self.plots
    }

    pub(crate) fn render(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>{}</title>\n<style>{STYLE}</style>\n{}\n</head>\n<body>\n{}</body>\n</html>\n",
            esc(&self.title),
            plotly_js(),
            self.body
        )
    }

    /// Writes the page to `out` atomically (temporary file in the same directory, renamed),
    /// creating its missing parent folders first (`-o newdir/sub/x.html`). Called last, once
    /// every input has been read and checked, so bad input leaves no folder behind either.
    pub(crate) fn write(&self, out: &Path) -> Result<(), ReportError> {
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(ReportError::io(parent))?;
        }
        write_atomic(out, self.render().as_bytes())
    }
}

/// Writes `bytes` to `out` through a temporary sibling (`aorta_ingest::atomic`).
pub(crate) fn write_atomic(out: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    aorta_ingest::atomic::write_bytes(out, bytes).map_err(ReportError::io(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_is_self_contained_and_escaped() {
        let mut p = Page::new("a <b> & 'c'");
        p.table(&["op"], &[vec!["<script>".into()], vec!["1.500".into()]]);
        let html = p.render();
        assert!(html.contains("a &lt;b&gt; &amp; &#39;c&#39;"));
        assert!(html.contains("<td>&lt;script&gt;</td>"));
        assert!(html.contains("<td class=\"n\">1.500</td>"));
        assert!(!html.contains("<script src"), "plotly.js is inlined");
        assert!(
            html.len() < 5_000_000,
            "only plotly.js is embedded, not MathJax"
        );
        assert!(html.contains("Plotly"));
    }

    #[test]
    fn long_tables_collapse_behind_a_summary_line() {
        let rows = |n: usize| (0..n).map(|i| vec![i.to_string()]).collect::<Vec<_>>();
        let mut p = Page::new("t");
        p.table(&["a"], &rows(OPEN_ROWS));
        assert!(
            !p.render().contains("<details>"),
            "{OPEN_ROWS} rows stay open"
        );
        p.table(&["a", "b"], &rows(OPEN_ROWS + 1));
        let html = p.render();
        assert_eq!(html.matches("<details>").count(), 1);
        let at = html.find("<details><summary>Table: 21 rows (a, b); click to show</summary>");
        let table = html.rfind("<table>").unwrap();
        assert!(at.is_some_and(|d| d < table) && html.ends_with("</details>\n</body>\n</html>\n"));
    }

    #[test]
    fn failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("missing-dir/report.html");
        assert!(write_atomic(&out, b"x").is_err());
        assert!(!out.exists());
        let out = dir.path().join("r.html");
        write_atomic(&out, b"x").unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file left");
    }
}
