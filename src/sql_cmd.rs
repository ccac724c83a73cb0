//! `aorta sql`: one SQL statement over the dataset (`aorta_transform::sql`: SQLite over the
//! dataset's tables, or polars for an aggregate it can push down), printed as aligned text, CSV or JSON, or written with `-o` (Parquet, CSV
//! or JSON by the file's extension) through a temporary file and a rename: a failed query
//! leaves no file.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use aorta_transform::sql::Engine;
use polars::prelude::*;

use crate::frame_out::{frame_json, render_frame, write_csv};
use crate::toolbox_cli::{SqlArgs, SqlFormat};

pub(crate) fn run(args: SqlArgs) -> Result<ExitCode> {
    if args.explain {
        let (engine, why) = aorta_transform::sql::explain(&args.query);
        let engine = match engine {
            Engine::Polars => "polars (pushed down)",
            Engine::Sqlite => "SQLite",
        };
        println!("{engine}: {why}");
        return Ok(ExitCode::SUCCESS);
    }
    let root = args.dataset.as_path();
    let _lock = crate::dataset_lock::for_read(root, "aorta sql")?;
    let (mut df, _) = aorta_transform::sql::query_with(root, &args.query, !args.sqlite)?;
    match &args.out {
        Some(path) => {
            let format = by_extension(path).unwrap_or(args.format);
            aorta_ingest::atomic::write_file(path, |w| write(w, &mut df, format))
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("{} rows written to {}", df.height(), path.display());
        }
        None if args.format == SqlFormat::Parquet => {
            bail!("--format parquet needs -o FILE (Parquet is not for a terminal)")
        }
        None => write(&mut std::io::stdout().lock(), &mut df, args.format)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn by_extension(path: &Path) -> Option<SqlFormat> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "parquet" => Some(SqlFormat::Parquet),
        "csv" => Some(SqlFormat::Csv),
        "json" => Some(SqlFormat::Json),
        "txt" => Some(SqlFormat::Table),
        _ => None,
    }
}

fn write(out: &mut impl Write, df: &mut DataFrame, format: SqlFormat) -> std::io::Result<()> {
    match format {
        SqlFormat::Table => out.write_all(render_frame(df, 80).as_bytes()),
        SqlFormat::Csv => write_csv(out, &[df]),
        SqlFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &frame_json(df))?;
            writeln!(out)
        }
        SqlFormat::Parquet => ParquetWriter::new(out)
            .with_compression(ParquetCompression::Zstd(None))
            .finish(df)
            .map(|_| ())
            .map_err(std::io::Error::other),
    }
}
