//! What a run records: its manifest, its prefix cache key and its run file,
//! built the same way for `bench` and `matrix`.

use super::decoding::Decoding;
use super::execute::Executed;
use super::plan::Plan;
use crate::corpus::Source;
use crate::engine::model::Model;
use crate::record::reference::{self, Header, Identity, RefTarget, Reference};
use crate::record::run::{CorpusInfo, FORMAT_VERSION, Manifest, ModelInfo, Params, ReferenceInfo, RunFile, Runtime, Summary};
use crate::score::kld::TopK;
use crate::settings::ContextConfig;
use crate::settings::Named;
use crate::support::fsutil::sha256_hex;
use crate::targets::TargetSpec;

/// Everything a run file records besides the measurements.
#[derive(Clone)]
pub struct RunSpec<'a> {
    pub model: &'a Model,
    pub src: &'a Source,
    pub plan: &'a Plan,
    /// The run's context, as created ([`Decoding::context`]).
    pub cfg: &'a ContextConfig,
    /// The build label; `None`: the model file's name.
    pub build: Option<&'a str>,
    /// The hub reference the model came from.
    pub origin: Option<&'a crate::support::hub::Origin>,
    pub target: &'a TargetSpec,
    pub decoding: &'a Decoding,
    /// The reference the forced pass is measured against.
    pub reference: Option<&'a Reference>,
}

impl RunSpec<'_> {
    /// The run's manifest, complete before anything is decoded.
    pub fn manifest(&self) -> Manifest {
        Manifest {
            command: crate::record::run::MadeBy::Bench,
            model: Some(self.model_info()),
            context: Some(self.cfg.clone()),
            corpus: CorpusInfo {
                ambiguous: self.plan.ambiguous.clone(),
                few_code_lines: self.plan.few_code_lines,
                ..CorpusInfo::of(self.src, self.plan.crop.clone(), Some(self.plan.prefix_tokens.len()))
            },
            params: self.params(),
            runtime: self.runtime(),
            external: None,
            reference: self.reference.map(|r| ReferenceInfo {
                path: r.path.display().to_string(),
                sha256: r.sha256.clone(),
                build: r.header.source.build.clone(),
                model_sha256: r.header.source.model_sha256.clone(),
                type_k: r.header.source.context.type_k,
                type_v: r.header.source.context.type_v,
                kv_rotation: r.header.source.context.kv_rotation,
                top_k: r.header.top_k,
            }),
            rescored_from: None,
        }
    }

    /// What a reference made by this run, or compared with it, must share
    /// ([`crate::record::keys::reference_identity`]).
    pub(crate) fn reference_identity(&self) -> Identity {
        crate::record::keys::reference_identity(&self.manifest(), self.model.vocab_fingerprint())
    }

    /// Writes this run's forced distributions as a reference file (`made`:
    /// a name posrecall made, see [`reference::save`]).
    pub fn save_reference(&self, path: &std::path::Path, made: bool, top_k: usize, saved: &[(RefTarget, Vec<TopK>)]) -> anyhow::Result<()> {
        let header = Header {
            format: reference::FORMAT,
            top_k: saved.iter().flat_map(|(_, e)| e.first()).next().map_or(top_k, |e| e.ids.len()),
            identity: self.reference_identity(),
            source: reference::Origin {
                model_sha256: self.model.sha256.clone(),
                build: self.model_info().build,
                context: self.cfg.clone(),
                cpu_features: Some(crate::engine::device::cpu_features()),
            },
            targets: saved.iter().map(|(t, _)| t.clone()).collect(),
        };
        let entries: Vec<Vec<TopK>> = saved.iter().map(|(_, e)| e.clone()).collect();
        reference::save(path, &header, &entries, made)
    }

    fn model_info(&self) -> ModelInfo {
        let model = self.model;
        // A split model is named as the file it was split from: the first
        // part's name without `-00001-of-0000N`.
        let file_name = || {
            let name = model.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let suffix = format!("-00001-of-{:05}.gguf", model.parts.len());
            match name.strip_suffix(&suffix) {
                Some(stem) if !model.parts.is_empty() => format!("{stem}.gguf"),
                _ => name,
            }
        };
        ModelInfo {
            path: model.path.display().to_string(),
            sha256: model.sha256.clone(),
            size_bytes: model.size_bytes,
            parts: model
                .parts
                .iter()
                .map(|p| crate::record::run::ModelPart {
                    path: p.path.display().to_string(),
                    size_bytes: p.size_bytes,
                    sha256: p.sha256.clone(),
                })
                .collect(),
            architecture: model.architecture.clone(),
            name: model.name.clone(),
            file_type: model.file_type.clone(),
            build: self.build.map_or_else(file_name, str::to_string),
            n_params: model.n_params,
            n_ctx_train: model.n_ctx_train,
            chat_template: model.chat_template.is_some(),
            hub: self.origin.cloned(),
            layers: Some(layers(&self.model.state_shape(self.cfg.type_k, self.cfg.type_v))),
        }
    }

    fn params(&self) -> Params {
        let decoding = self.decoding;
        Params {
            probe: Some(self.plan.frame.kind),
            max_new_tokens: Some(self.plan.max_new_tokens),
            decode_mode: Some(decoding.mode()),
            parallel: decoding.parallel().then_some(decoding.slots),
            fixed_tokens: decoding.fixed_tokens,
            no_forced: decoding.no_forced,
            only: (!self.plan.only.is_empty()).then(|| self.plan.only.clone()),
            think: self.plan.template.as_ref().map(|t| t.think),
            think_budget: self.plan.think_budget,
            draft: decoding.fixed_tokens.is_none().then_some(decoding.draft).filter(|_| !decoding.forced_only),
            draft_max: (decoding.draft != crate::decode::draft::DraftMode::None).then_some(decoding.draft_max),
            ..Params::of(self.target)
        }
    }

    fn runtime(&self) -> Runtime {
        let compute = crate::engine::device::compute();
        Runtime {
            backend: Some(compute.backend),
            device: compute.device,
            cpu_features: Some(compute.cpu_features),
            chat_renderer: self.plan.frame.renderer.clone(),
            prefix_sha256: Some(sha256_hex(self.plan.prefix_text.as_bytes())),
            prompt_boundary_exact: Some(self.plan.boundary_exact),
            parallel_fallback: self.decoding.fallback.clone(),
            draft_fallback: self.decoding.draft_fallback.clone(),
            restore: Some(self.decoding.restore.as_str().to_string()),
            template: self.plan.template.clone(),
            ..Runtime::current()
        }
    }

    /// The name of this run's evaluated prefix in a prefix cache
    /// ([`crate::record::keys::prefix_cache_key`]).
    pub(crate) fn prefix_cache_key(&self) -> String {
        crate::record::keys::prefix_cache_key(&self.manifest())
    }

    /// The run file of a length ladder (this spec's plan is its longest
    /// window's): every window's results, and per window its record.
    pub(crate) fn ladder_run_file(
        &self,
        lx: super::ladder::LadderExecuted,
        stopped: Option<String>,
        effective_at: f64,
        total_ms: f64,
    ) -> RunFile {
        let mut run = self.run_file(lx.executed, total_ms);
        run.ladder = Some(crate::record::run::LadderRecord {
            effective_at,
            effective_length: crate::record::run::RungRecord::effective_length(&lx.rungs, effective_at),
            stopped,
            rungs: lx.rungs,
        });
        run
    }

    /// The run file: the manifest, the results and their summary, and the
    /// timings, with the model's load and hash times; `total_ms` is the run
    /// as its command measured it.
    pub(crate) fn run_file(&self, executed: Executed, total_ms: f64) -> RunFile {
        let mut timings = executed.timings;
        timings.hash_ms = self.model.hash_ms;
        timings.load_ms_without_hash = self.model.weights_ms;
        timings.load_ms = self.model.weights_ms + self.model.hash_ms;
        timings.total_ms = total_ms;
        RunFile {
            format: FORMAT_VERSION,
            manifest: self.manifest(),
            summary: Summary::of(&executed.results),
            targets: executed.results,
            timings: Some(timings),
            ladder: None,
            unfinished: None,
        }
    }
}

/// The layers by what they keep, as the run file records them (the record
/// names no engine type, so the bench layer turns one into the other).
fn layers(shape: &crate::engine::state_size::StateShape) -> crate::record::run::Layers {
    crate::record::run::Layers {
        total: shape.full_attn_layers + shape.swa_layers + shape.recurrent_layers,
        full_attention: shape.full_attn_layers,
        sliding_window: shape.swa_layers,
        window: shape.n_swa,
        recurrent: shape.recurrent_layers,
    }
}
