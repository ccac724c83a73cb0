//! Headless Chromium for the report tests: open a page from disk (or many pages in one
//! browser), let its scripts run, and return the DOM after them and every console message the
//! page produced.

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
    let (dom, stderr) = dump_dom(browser, &file_url(html), &[]);
    Rendered {
        dom,
        console: console_lines(&stderr).map(str::to_string).collect(),
        stderr,
    }
}

/// Opens every page of `html` in one Chromium, each in an iframe of a harness page, and
/// returns what each page alone would have given `render`: its DOM after its scripts ran
/// (without its `<script>` elements, which `render`'s checks never read) and the console
/// messages whose source is that page. A message from no page (the harness's own) is given to
/// every page, so that it fails their checks.
///
/// One start-up instead of one per page: Chromium's own start and its dump of each page's
/// 4.6 MB of inlined plotly.js were about half of a report page's CPU time (~7 CPU s each on
/// the 2-core CI machine; docs/PERFORMANCE.md, "Cold CI").
pub(crate) fn render_all(browser: &Path, html: &[PathBuf]) -> Vec<Rendered> {
    let urls: Vec<String> = html.iter().map(|h| file_url(h)).collect();
    let dir = tempfile::tempdir().unwrap();
    let harness = dir.path().join("harness.html");
    std::fs::write(&harness, harness_page(&urls)).unwrap();
    // The harness reads each frame's document: file:// pages are of one origin only with
    // this flag.
    let (dom, stderr) = dump_dom(
        browser,
        &file_url(&harness),
        &["--allow-file-access-from-files"],
    );
    let sources: Vec<String> = urls.iter().map(|u| format!("source: {u} (")).collect();
    let unattributed: Vec<&str> = console_lines(&stderr)
        .filter(|l| !sources.iter().any(|s| l.contains(s.as_str())))
        .collect();
    sources
        .iter()
        .enumerate()
        .map(|(i, source)| {
            let start = format!("<textarea id=\"dom-{i}\">");
            let dom = dom
                .split_once(&start)
                .and_then(|(_, rest)| rest.split_once("</textarea>"))
                .map(|(text, _)| unescape_text(text))
                .unwrap_or_default();
            let console = console_lines(&stderr)
                .filter(|l| l.contains(source.as_str()))
                .chain(unattributed.iter().copied())
                .map(str::to_string)
                .collect();
            Rendered {
                dom,
                console,
                stderr: stderr.clone(),
            }
        })
        .collect()
}

fn file_url(html: &Path) -> String {
    format!("file://{}", html.canonicalize().unwrap().display())
}

/// The page that frames `urls` and, once their scripts have run (10 s of virtual time after
/// every frame loaded), copies each frame's document without its scripts into a
/// `<textarea id="dom-N">` of its own, where `--dump-dom` prints it.
fn harness_page(urls: &[String]) -> String {
    let list = serde_json::to_string(urls).unwrap();
    format!(
        r#"<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><script>
for (const url of {list}) {{
  const f = document.createElement("iframe");
  f.style.width = "1400px";
  f.style.height = "2000px";
  f.src = url;
  document.body.appendChild(f);
}}
window.addEventListener("load", () => setTimeout(() => {{
  document.querySelectorAll("iframe").forEach((f, i) => {{
    const copy = f.contentDocument.documentElement.cloneNode(true);
    copy.querySelectorAll("script").forEach((s) => s.remove());
    const t = document.createElement("textarea");
    t.id = "dom-" + i;
    t.textContent = copy.outerHTML;
    document.body.appendChild(t);
  }});
}}, 10000));
</script></body></html>"#
    )
}

/// A text node as the DOM serializer escaped it, back.
fn unescape_text(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// `[pid:tid:time:INFO:CONSOLE:line] "message", source: url (line)` (older builds:
/// `CONSOLE(line)`); every level is logged as INFO, so every message counts.
fn console_lines(stderr: &str) -> impl Iterator<Item = &str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE"))
}

/// Runs Chromium on `url` with `--dump-dom`: the DOM it printed and its stderr. Panics when
/// it does not finish within two minutes.
fn dump_dom(browser: &Path, url: &str, flags: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
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
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
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
    (out.join().unwrap(), err.join().unwrap())
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
    let r = render(browser, html);
    check_rendered(html, plots, &r);
    r
}

/// `open_and_check` for many pages, opened together (`render_all`).
pub(crate) fn open_and_check_all(browser: &Path, pages: &[(PathBuf, usize)]) {
    let html: Vec<PathBuf> = pages.iter().map(|(h, _)| h.clone()).collect();
    for ((html, plots), r) in pages.iter().zip(render_all(browser, &html)) {
        check_rendered(html, *plots, &r);
    }
}

/// The page has `plots` chart divs, its console was silent, and plotly.js drew every chart.
fn check_rendered(html: &Path, plots: usize, r: &Rendered) {
    let page = std::fs::read_to_string(html).unwrap();
    assert_eq!(
        count(&page, "class=\"plotly-graph-div\""),
        plots,
        "chart divs in {}",
        html.display()
    );
    assert!(
        r.console.is_empty(),
        "console messages in {}:\n{}",
        html.display(),
        r.console.join("\n")
    );
    assert!(
        r.dom.contains("</html>"),
        "no DOM dumped for {}:\n{}",
        html.display(),
        r.stderr
    );
    // plotly.js replaces each empty chart div with a plot container holding its SVG layers.
    assert_eq!(
        count(&r.dom, "class=\"plot-container plotly\""),
        plots,
        "{}",
        html.display()
    );
    assert!(
        count(&r.dom, "class=\"main-svg\"") >= 2 * plots,
        "{}",
        html.display()
    );
}
