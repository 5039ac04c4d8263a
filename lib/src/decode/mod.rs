//! How answers are generated, below the engine and free of llama.cpp: the
//! drafts of exact speculative decoding ([`draft`]) and the reading of a
//! next-token logits row ([`logits`]). The engine runs them; the record keeps
//! their statistics and the metrics reuse the logits reading.

pub mod draft;
pub mod logits;
