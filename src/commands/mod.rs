//! One file per subcommand: each wires the pipeline stages together.

pub mod ask;
pub mod bench;
pub mod compare;
pub mod matrix;
pub mod report;
pub mod score;
pub mod targets;

use crate::cli::TargetArgs;
use crate::crop::{Crop, CropMode};
use crate::corpus::Corpus;
use crate::run::Params;
use crate::targets::TargetOptions;

impl TargetArgs {
    pub fn options(&self) -> TargetOptions {
        TargetOptions {
            count: self.count,
            lines: self.lines,
            seed: self.seed,
            skip_blank: self.skip_blank,
        }
    }

    /// The renaming seed when `--rename` is on (the target seed).
    pub fn rename_seed(&self) -> Option<u64> {
        self.rename.then_some(self.seed)
    }

    /// The pass threshold: `--pass`, else 8 capped at LINES.
    pub fn pass(&self) -> usize {
        self.pass.unwrap_or(8.min(self.lines))
    }

    /// The parameters recorded in run and targets files.
    pub fn params(&self) -> Params {
        Params {
            count: self.count,
            lines: self.lines,
            pass: self.pass(),
            seed: self.seed,
            normalize: self.normalize,
            skip_blank: self.skip_blank,
            probe: None,
            max_new_tokens: None,
            decode_mode: None,
            parallel: None,
            fixed_tokens: None,
            no_forced: false,
        }
    }

    /// Checks the numbers make sense together.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.count == 0 {
            anyhow::bail!("--count must be at least 1");
        }
        if self.lines == 0 {
            anyhow::bail!("--lines must be at least 1");
        }
        if self.pass() > self.lines {
            anyhow::bail!("--pass {} is more than --lines {}: nothing could pass", self.pass(), self.lines);
        }
        Ok(())
    }
}

/// `manifest.corpus` / the targets file's `corpus` for a source and its crop.
pub fn corpus_info(src: &crate::corpus::Source, crop: Crop, prefix_tokens: Option<usize>) -> crate::run::CorpusInfo {
    crate::run::CorpusInfo {
        path: src.corpus.path.display().to_string(),
        // The file on disk; a renamed text's own sha256 is in `rename`.
        sha256: src.file_sha256.clone(),
        language: src.language.name().to_string(),
        crop,
        prefix_tokens,
        rename: src.renamed.as_ref().map(|r| crate::corpus::RenameInfo {
            mapping: Default::default(),
            ..r.clone()
        }),
    }
}

/// The crop record of 0-based lines `first..=last`.
pub fn crop_record(corpus: &Corpus, mode: CropMode, first: usize, last: usize) -> Crop {
    Crop {
        mode,
        first_line: first + 1,
        last_line: last + 1,
        sha256: crate::fsutil::sha256_hex(corpus.slice_lines(first, last).as_bytes()),
    }
}
