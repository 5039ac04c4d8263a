//! Plumbing the stages share: files written whole and cached digests
//! ([`fsutil`]), models fetched from the hub ([`hub`]) and the progress
//! display and notes the face passes in ([`progress`]).

pub mod fsutil;
pub mod hub;
pub mod progress;
