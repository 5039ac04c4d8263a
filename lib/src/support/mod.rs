//! Plumbing the stages share: files written whole and cached digests
//! ([`fsutil`]), models fetched from the hub ([`hub`]) and the progress
//! display and notes the face passes in ([`progress`]), and what of a URL
//! may be shown ([`shown`]).

pub mod fsutil;
pub mod hub;
pub mod progress;
pub mod shown;
