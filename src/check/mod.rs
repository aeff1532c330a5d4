//! A submission's checks, interpreted from the lesson's data: the code rules (read
//! from the syntax tree with syn, not a regex), and the card and quiz. Knows nothing
//! of the progress file: callers hand it plain numbers.

pub mod card;
pub mod figures;
pub mod glossary;
pub mod rules;
