//! Writes a synthetic access log (see `sluice_replay::generate`).
//!
//! usage: generate-log nginx|envoy|json|csv KEYS LINES_PER_SEC DURATION_SECS OUT_FILE

use std::io::{BufWriter, Write};

use sluice_replay::generate::{LogFormat, LogSpec, write_log};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [format, keys, rate, duration, out] = args.as_slice() else {
        return Err(
            "usage: generate-log nginx|envoy|json|csv KEYS LINES_PER_SEC DURATION_SECS OUT_FILE"
                .into(),
        );
    };
    let format = match format.as_str() {
        "nginx" => LogFormat::NginxCombined,
        "envoy" => LogFormat::Envoy,
        "json" => LogFormat::Json,
        "csv" => LogFormat::Csv,
        other => return Err(format!("unknown format {other}").into()),
    };
    let spec = LogSpec::new(format, keys.parse()?, rate.parse()?, duration.parse()?);
    let mut file = BufWriter::with_capacity(1 << 20, std::fs::File::create(out)?);
    let lines = write_log(&spec, &mut file)?;
    file.flush()?;
    eprintln!("{lines} lines written to {out}");
    Ok(())
}
