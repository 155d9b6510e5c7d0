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

/// Runs `fedbandits audit JOB --bits --trials trials` on `yaml` (written
/// into `dir`) and checks its verdicts: exit 1 (a float cell failed),
/// `cells` rows, every discrete cell passing with no unreachable release
/// and a lower bound of 0, every float cell failing with a lower bound on
/// delta above `delta` (the cells' own: no float figure holds for the
/// bits). Returns the table's rows.
pub fn assert_bits_verdicts(dir: &Path, yaml: &str, trials: u64, cells: usize, delta: f64) -> Vec<String> {
    let job = dir.join("bits.yaml");
    std::fs::write(&job, yaml).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fedbandits"))
        .args([
            "audit",
            job.to_str().unwrap(),
            "--bits",
            "--trials",
            &trials.to_string(),
            "--out",
        ])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(1), "{text}");
    let rows: Vec<String> = text
        .lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|c| c.parse::<u64>().is_ok()))
        .map(str::to_string)
        .collect();
    assert_eq!(rows.len(), cells, "{text}");
    for r in &rows {
        let cols: Vec<&str> = r.split_whitespace().collect();
        let lb: f64 = cols[5].parse().unwrap();
        if cols[2] == "binomial" {
            // sdp_vecsum: integer sums under either sampler.
            assert_eq!(&cols[3..5], &[trials.to_string().as_str(), "0"], "{r}");
            assert!(r.contains("pass") && lb == 0.0, "{r}");
        } else if r.contains("sampler=discrete") {
            assert_eq!(&cols[2..5], &["discrete", trials.to_string().as_str(), "0"], "{r}");
            assert!(r.contains("pass") && lb == 0.0, "{r}");
        } else {
            assert_eq!(cols[2], "float", "{r}");
            assert!(r.contains("FAIL") && lb > delta, "{r}");
        }
    }
    rows
}
