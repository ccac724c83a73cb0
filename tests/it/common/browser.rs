//! Headless Chromium for the report tests: open a page from disk, let its scripts run, and
//! return the DOM after them and every console message the page produced.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the browser saw.
pub(crate) struct Rendered {
    /// `--dump-dom`: the document after scripts ran.
    pub dom: String,
    /// Console messages (`console.*` and uncaught exceptions), one per line.
    pub console: Vec<String>,
    /// Chromium's whole stderr, for failure messages.
    pub stderr: String,
}

/// The Chromium binary (Debian's `chromium`, installed by `.ci/run`); `None` (skip) when it
/// is missing outside CI, a failure under `CI=true`.
pub(crate) fn chromium() -> Option<PathBuf> {
    super::tool(&["chromium", "chromium-browser"], "chromium")
}

fn pipe_to_string(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            s = String::from_utf8_lossy(&b).into_owned();
        }
        s
    })
}

/// Opens `html` in headless Chromium (scripts get 20 s of virtual time) and returns the DOM
/// and the console. Panics when Chromium does not finish within two minutes.
pub(crate) fn render(browser: &Path, html: &Path) -> Rendered {
    let profile = tempfile::tempdir().unwrap();
    let url = format!("file://{}", html.canonicalize().unwrap().display());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-extensions",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=20000",
            "--window-size=1400,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(&url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let (out, err) = (
        pipe_to_string(child.stdout.take()),
        pipe_to_string(child.stderr.take()),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish {url} within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (dom, stderr) = (out.join().unwrap(), err.join().unwrap());
    // `[pid:tid:time:INFO:CONSOLE:line] "message", source: url (line)` (older builds:
    // `CONSOLE(line)`); every level is logged as INFO, so every message counts.
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    Rendered {
        dom,
        console,
        stderr,
    }
}

/// Occurrences of `needle` in `hay`.
pub(crate) fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// The texts of the legend entries plotly drew (`<text class="legendtext" …>name</text>`).
pub(crate) fn legend_texts(dom: &str) -> Vec<String> {
    let re = regex::Regex::new(r#"class="legendtext"[^>]*>([^<]*)<"#).unwrap();
    re.captures_iter(dom).map(|c| c[1].to_string()).collect()
}

/// Each chart's `{data, layout, config}` as the page hands it to plotly.js.
pub(crate) fn plots(html: &str) -> Vec<serde_json::Value> {
    let re =
        regex::Regex::new(r#"(?s)Plotly\.newPlot\("plot-\d+", (\{.*?\})\);\s*</script>"#).unwrap();
    re.captures_iter(html)
        .map(|c| serde_json::from_str(&c[1]).unwrap())
        .collect()
}

/// The trace named `name` of a chart.
pub(crate) fn trace<'a>(plot: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    trace_opt(plot, name).unwrap_or_else(|| panic!("no trace {name}"))
}

/// The trace named `name` of a chart, if it has one.
pub(crate) fn trace_opt<'a>(
    plot: &'a serde_json::Value,
    name: &str,
) -> Option<&'a serde_json::Value> {
    plot["data"].as_array()?.iter().find(|t| t["name"] == name)
}

/// A JSON array of numbers.
pub(crate) fn nums(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Opens `html` and checks the console is silent and `plots` plotly charts rendered.
pub(crate) fn open_and_check(browser: &Path, html: &Path, plots: usize) -> Rendered {
    let page = std::fs::read_to_string(html).unwrap();
    assert_eq!(
        count(&page, "class=\"plotly-graph-div\""),
        plots,
        "chart divs in {}",
        html.display()
    );
    let r = render(browser, html);
    assert!(
        r.console.is_empty(),
        "console messages in {}:\n{}",
        html.display(),
        r.console.join("\n")
    );
    assert!(r.dom.contains("</html>"), "no DOM dumped:\n{}", r.stderr);
    // plotly.js replaces each empty chart div with a plot container holding its SVG layers.
    assert_eq!(count(&r.dom, "class=\"plot-container plotly\""), plots);
    assert!(count(&r.dom, "class=\"main-svg\"") >= 2 * plots);
    r
}
