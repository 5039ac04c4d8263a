//! The face of posrecall: the command line ([`cli`], clap's types), one
//! module per subcommand that turns parsed flags into the library's options,
//! calls the library and prints ([`commands`]), and the terminal's progress
//! bars ([`progress`]). Everything else is the `posrecall` library, which
//! neither parses a flag nor draws: it is handed what it shows through.

pub mod cli;
pub mod commands;
pub mod progress;
