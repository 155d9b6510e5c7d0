//! `uci_diabetes`: Zhu et al.'s real-data experiment on the UCI "Diabetes
//! 130-US hospitals for years 1999-2008" data (101,766 encounters), read
//! from a user-supplied `diabetic_data.csv` (the file cannot be downloaded
//! here; README, "Job files", says where to get it).
//!
//! Choices, as a researcher reproducing the paper would make them (the
//! paper's supplementary data processing is not in the seed):
//! * Agents (hospitals): the records split, in file order, into N
//!   consecutive parts of equal size (the paper divides the samples into 3
//!   equal parts and notes that local bias appears when the split follows
//!   the order of the samples). Default N = 3.
//! * Arms: the 23 medication columns in 5 groups by drug class
//!   ([`MEDICATIONS`]); a record counts for arm k when any medication of
//!   group k is given (value other than `No`), so a record may count for
//!   several arms.
//! * Reward: `readmitted` `>30` -> 1 (the treatment worked in some sense),
//!   `NO` and `<30` -> 0, as in the paper.
//! * Pulling arm k at agent i returns the reward of a record drawn uniformly
//!   from agent i's records of arm k. Rewards are 0/1, so only the counts
//!   matter: the draw is u ~ U[0,1) from the agent's stream (one per round,
//!   whatever is pulled), record floor(u n) of the n records with the ones
//!   first. mu_{i,k} is the share of ones.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Arms.
pub const ARMS: usize = 5;

/// Names of the arms (drug classes).
pub const ARM_NAMES: [&str; ARMS] = [
    "metformin",
    "insulin secretagogues (sulfonylureas, meglitinides)",
    "insulin sensitizers and alpha-glucosidase inhibitors",
    "insulin",
    "combinations and others",
];

/// The 23 medication columns of diabetic_data.csv and their arms.
pub const MEDICATIONS: [(&str, usize); 23] = [
    ("metformin", 0),
    ("repaglinide", 1),
    ("nateglinide", 1),
    ("chlorpropamide", 1),
    ("glimepiride", 1),
    ("acetohexamide", 1),
    ("glipizide", 1),
    ("glyburide", 1),
    ("tolbutamide", 1),
    ("tolazamide", 1),
    ("pioglitazone", 2),
    ("rosiglitazone", 2),
    ("troglitazone", 2),
    ("acarbose", 2),
    ("miglitol", 2),
    ("insulin", 3),
    ("examide", 4),
    ("citoglipton", 4),
    ("glyburide-metformin", 4),
    ("glipizide-metformin", 4),
    ("glimepiride-pioglitazone", 4),
    ("metformin-rosiglitazone", 4),
    ("metformin-pioglitazone", 4),
];

/// The outcome column.
pub const READMITTED: &str = "readmitted";

/// Reading the data failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataError {
    /// The file cannot be read.
    #[error(
        "{path}: cannot read ({message}); download diabetic_data.csv of the UCI \"Diabetes 130-US hospitals\" data set and give its path as `data`"
    )]
    Io {
        /// File.
        path: String,
        /// Cause.
        message: String,
    },
    /// A required column is missing from the header.
    #[error(
        "{path}:1: missing column '{column}' (the UCI file's header has the 23 medication columns and 'readmitted')"
    )]
    MissingColumn {
        /// File.
        path: String,
        /// Column.
        column: String,
    },
    /// A line is malformed or holds a value outside the allowed ones.
    #[error("{path}:{line}: column '{column}': {message}")]
    Bad {
        /// File.
        path: String,
        /// Line (1-based, the header is line 1).
        line: u64,
        /// Column.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// An agent has no record of some arm.
    #[error(
        "{path}: agent {agent} (records {from}..{to} in file order) has no record of arm {arm} ({name}); use fewer agents"
    )]
    EmptyArm {
        /// File.
        path: String,
        /// Agent.
        agent: usize,
        /// First record.
        from: usize,
        /// One past the last record.
        to: usize,
        /// Arm.
        arm: usize,
        /// Its name.
        name: &'static str,
    },
}

/// What an agent's pulls resample from: per (agent, arm), agent-major, the
/// number of records and how many of them have reward 1.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RecordCounts {
    /// The file.
    pub path: String,
    /// Records per (agent, arm).
    pub total: Vec<u64>,
    /// Records with reward 1 per (agent, arm).
    pub ones: Vec<u64>,
}

/// One record: the arms it counts for and its reward.
struct Record {
    arms: [bool; ARMS],
    reward: bool,
}

fn bad(path: &str, line: u64, column: &str, message: impl Into<String>) -> DataError {
    DataError::Bad {
        path: path.to_owned(),
        line,
        column: column.to_owned(),
        message: message.into(),
    }
}

/// The largest data file read: the UCI file is about 18 MB; a device or an
/// unrelated huge file named by mistake is refused before reading.
pub const MAX_DATA_BYTES: u64 = 1 << 30;

fn read(path: &Path) -> Result<Vec<Record>, DataError> {
    let p = path.display().to_string();
    let io = |message: String| DataError::Io {
        path: p.clone(),
        message,
    };
    let file = crate::input::open_regular(path).map_err(|e| io(e.to_string()))?;
    let len = file.metadata().map_err(|e| io(e.to_string()))?.len();
    if len > MAX_DATA_BYTES {
        return Err(io(format!("{len} bytes, above the limit of {MAX_DATA_BYTES}")));
    }
    let mut rd = csv::ReaderBuilder::new().has_headers(true).from_reader(file);
    let header = rd.headers().map_err(|e| DataError::Io {
        path: p.clone(),
        message: e.to_string(),
    })?;
    let find = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| DataError::MissingColumn {
                path: p.clone(),
                column: name.to_owned(),
            })
    };
    let meds: Vec<(usize, usize, &str)> = MEDICATIONS
        .iter()
        .map(|&(name, arm)| find(name).map(|i| (i, arm, name)))
        .collect::<Result<_, _>>()?;
    let outcome = find(READMITTED)?;
    let mut out = Vec::new();
    for rec in rd.records() {
        let rec = rec.map_err(|e| {
            let line = e.position().map_or(0, |pos| pos.line());
            bad(&p, line, "-", e.to_string())
        })?;
        let line = rec.position().map_or(0, |pos| pos.line());
        let mut arms = [false; ARMS];
        for &(i, arm, name) in &meds {
            match rec.get(i).map(str::trim) {
                Some("No") => {}
                Some("Steady" | "Up" | "Down") => arms[arm] = true,
                Some(v) => return Err(bad(&p, line, name, format!("'{v}'; allowed: No, Steady, Up, Down"))),
                None => return Err(bad(&p, line, name, "missing field")),
            }
        }
        let reward = match rec.get(outcome).map(str::trim) {
            Some(">30") => true,
            Some("NO" | "<30") => false,
            Some(v) => return Err(bad(&p, line, READMITTED, format!("'{v}'; allowed: NO, >30, <30"))),
            None => return Err(bad(&p, line, READMITTED, "missing field")),
        };
        out.push(Record { arms, reward });
    }
    Ok(out)
}

type Cache = Mutex<HashMap<(PathBuf, usize), Arc<RecordCounts>>>;

/// The counts of `agents` agents from the file at `path` (read once per
/// process and agent count).
pub fn load(path: &Path, agents: usize) -> Result<Arc<RecordCounts>, DataError> {
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (path.to_path_buf(), agents);
    if let Some(c) = cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(c);
    }
    let records = read(path)?;
    let p = path.display().to_string();
    let n = records.len();
    let mut total = vec![0u64; agents * ARMS];
    let mut ones = vec![0u64; agents * ARMS];
    for i in 0..agents {
        let (from, to) = (i * n / agents, (i + 1) * n / agents);
        for r in &records[from..to] {
            for (k, &on) in r.arms.iter().enumerate() {
                if on {
                    total[i * ARMS + k] += 1;
                    ones[i * ARMS + k] += u64::from(r.reward);
                }
            }
        }
        if let Some(k) = (0..ARMS).find(|&k| total[i * ARMS + k] == 0) {
            return Err(DataError::EmptyArm {
                path: p,
                agent: i,
                from,
                to,
                arm: k,
                name: ARM_NAMES[k],
            });
        }
    }
    let counts = Arc::new(RecordCounts { path: p, total, ones });
    if let Ok(mut c) = cache.lock() {
        c.insert(key, counts.clone());
    }
    Ok(counts)
}

/// The header of diabetic_data.csv as the UCI file has it (for tests and
/// examples).
pub const HEADER: &str = "encounter_id,patient_nbr,race,gender,age,weight,admission_type_id,discharge_disposition_id,admission_source_id,time_in_hospital,payer_code,medical_specialty,num_lab_procedures,num_procedures,num_medications,number_outpatient,number_emergency,number_inpatient,diag_1,diag_2,diag_3,number_diagnoses,max_glu_serum,A1Cresult,metformin,repaglinide,nateglinide,chlorpropamide,glimepiride,acetohexamide,glipizide,glyburide,tolbutamide,pioglitazone,rosiglitazone,acarbose,miglitol,troglitazone,tolazamide,examide,citoglipton,insulin,glyburide-metformin,glipizide-metformin,glimepiride-pioglitazone,metformin-rosiglitazone,metformin-pioglitazone,change,diabetesMed,readmitted";
