//! Self-contained HTML reports (plotly). Filled by the compare/report issue.
