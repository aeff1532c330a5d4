//! serde_yaml reports positions inside the YAML it was given; authors need
//! positions inside the file they edit.

use std::path::Path;

/// Turns a serde_yaml error into `file:line:column: message`, with every
/// `line N` in the message moved to file lines too.
///
/// `first_line` is the file line the YAML text starts on (front matter starts
/// on line 2, after the opening `---`).
pub(crate) fn located(path: &Path, first_line: usize, error: serde_yaml::Error) -> anyhow::Error {
    let message = shift_line_numbers(&error.to_string(), first_line - 1);
    match error.location() {
        Some(location) => {
            let line = location.line() + first_line - 1;
            let column = location.column();
            // The position leads the message; saying it twice adds nothing.
            let repeated = format!(" at line {line} column {column}");
            let message = message.replacen(&repeated, "", 1);
            anyhow::anyhow!("{}:{line}:{column}: {message}", path.display())
        }
        None => anyhow::anyhow!("{}: {message}", path.display()),
    }
}

/// Adds `by` to the number after each `line ` in `message`.
fn shift_line_numbers(message: &str, by: usize) -> String {
    let mut shifted = String::new();
    let mut rest = message;
    while let Some(found) = rest.find("line ") {
        let (before, after) = rest.split_at(found + "line ".len());
        shifted.push_str(before);
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        match after[..digits].parse::<usize>() {
            Ok(number) => shifted.push_str(&(number + by).to_string()),
            Err(_) => shifted.push_str(&after[..digits]),
        }
        rest = &after[digits..];
    }
    shifted.push_str(rest);
    shifted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_move_by_the_offset() {
        assert_eq!(
            shift_line_numbers(
                "end of stream at line 5 column 1, while scanning at line 3 column 8",
                1
            ),
            "end of stream at line 6 column 1, while scanning at line 4 column 8"
        );
        assert_eq!(
            shift_line_numbers("no numbers; a line ends", 3),
            "no numbers; a line ends"
        );
    }
}
