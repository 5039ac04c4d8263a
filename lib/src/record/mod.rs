//! What a run leaves behind, as the documented schema: the run file
//! ([`run`]), the reference file of forced distributions ([`reference`]) and
//! the keys that decide when a saved state or a reference may be reused
//! ([`keys`]), each defined once. Imports no engine: reports read these
//! files on machines that never load a model.

pub mod keys;
pub mod reference;
pub mod run;
