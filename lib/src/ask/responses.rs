//! The responses file: one JSON object a line, one line per target, written
//! by `ask` as answers arrive and read by `score` (a user's own tool may
//! write it too: only `name` and `response` are required). This type is the
//! format, for both sides.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// One line of the responses file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Response {
    pub name: String,
    pub response: String,
    /// The answering request's wall time.
    #[serde(default)]
    pub wall_ms: u64,
    /// The server's `usage` object (token counts), or null.
    #[serde(default)]
    pub usage: Value,
    /// llama-server's `timings` object, where the server sends one.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub timings: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The server's bytes were not valid UTF-8 (`score` records it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invalid_utf8: bool,
    /// The server's reasoning, apart from the answer (never scored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// `usage.completion_tokens_details.reasoning_tokens`, where the server counts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<usize>,
}

impl Response {
    /// One line as read from a responses file (blank or not an answer: `None`).
    pub fn parse(line: &[u8]) -> Option<Response> {
        serde_json::from_slice(line).ok()
    }

    /// The line `ask` appends, without its newline.
    pub(crate) fn to_line(&self) -> Result<String> {
        Ok(serde_json::to_string(self)?)
    }
}

/// Every answer of a responses file by target name; blank lines are skipped,
/// and a line that is not an answer or answers a target twice is an error.
pub(crate) fn read_all(path: &Path) -> Result<HashMap<String, Response>> {
    let text = crate::support::fsutil::read_text(path).with_context(|| format!("cannot read responses {}", path.display()))?;
    let mut answers = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let a: Response = serde_json::from_str(line)
            .with_context(|| format!("{} line {}: expected {{\"name\": ..., \"response\": ...}}", path.display(), i + 1))?;
        let name = a.name.clone();
        if answers.insert(name.clone(), a).is_some() {
            bail!("{} line {}: a second answer for `{name}`", path.display(), i + 1);
        }
    }
    Ok(answers)
}
