//! A job run through the binary, as a user runs it, and the columns of
//! what it wrote: the helpers the suites that read a run's rows share.

use arrow_array::{Array, Float64Array, RecordBatch, StringArray, UInt64Array};
use std::path::Path;
use std::process::Command;

/// Writes `yaml` (a job named `name`) into `dir`, runs it with `--threads
/// threads` into `dir/out<threads>` (the cache in `dir/cache`), asserts
/// that the run succeeded and returns the batches of its one part.
pub fn run_job(dir: &Path, name: &str, yaml: &str, threads: &str) -> Vec<RecordBatch> {
    let job = dir.join(format!("{name}.yaml"));
    std::fs::write(&job, yaml).unwrap();
    let out = dir.join(format!("out{threads}"));
    let o = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .env("FEDBANDITS_CACHE_DIR", dir.join("cache"))
        .args(["run", job.to_str().unwrap(), "--threads", threads, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    fedbandits::output::read_parquet(&out.join(format!("{name}/part-00000-of-00001.parquet"))).unwrap()
}

/// Column `name` of `b` (a panic naming it where there is none).
fn column(b: &RecordBatch, name: &str) -> std::sync::Arc<dyn Array> {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
        .clone()
}

/// Row `i` of the float column `name`, None where null.
pub fn f64_at(b: &RecordBatch, name: &str, i: usize) -> Option<f64> {
    let c = column(b, name);
    let f = c.as_any().downcast_ref::<Float64Array>().unwrap();
    (!f.is_null(i)).then(|| f.value(i))
}

/// Row `i` of the text column `name`.
pub fn str_at(b: &RecordBatch, name: &str, i: usize) -> String {
    let c = column(b, name);
    c.as_any().downcast_ref::<StringArray>().unwrap().value(i).to_string()
}

/// Row `i` of the unsigned column `name`.
pub fn u64_at(b: &RecordBatch, name: &str, i: usize) -> u64 {
    column(b, name).as_any().downcast_ref::<UInt64Array>().unwrap().value(i)
}
