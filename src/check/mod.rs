//! Per-lesson checks of a submission: the code's shape (read with syn, not a regex),
//! the behaviour (same tokens as the reference), and the card (numbers quest measured).

pub mod card;
pub mod code;
