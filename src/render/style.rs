//! Text styles and the ANSI escape codes that draw them.

/// The foreground colours the renderer uses (ANSI SGR codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    Green = 32,
    Yellow = 33,
    Blue = 34,
    Magenta = 35,
    Cyan = 36,
    Grey = 90,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Style {
    pub bold: bool,
    pub italic: bool,
    pub underline: bool,
    pub dim: bool,
    pub fg: Option<Color>,
}

const RESET: &str = "\x1b[0m";

impl Style {
    pub const PLAIN: Style = Style {
        bold: false,
        italic: false,
        underline: false,
        dim: false,
        fg: None,
    };

    pub fn fg(color: Color) -> Style {
        Style {
            fg: Some(color),
            ..Style::PLAIN
        }
    }

    pub fn bold(self) -> Style {
        Style { bold: true, ..self }
    }

    /// Combines two styles: what either sets stays set; `other`'s colour wins.
    pub fn merge(self, other: Style) -> Style {
        Style {
            bold: self.bold || other.bold,
            italic: self.italic || other.italic,
            underline: self.underline || other.underline,
            dim: self.dim || other.dim,
            fg: other.fg.or(self.fg),
        }
    }

    /// The escape sequence that turns this style on ("" for plain text).
    fn start(self) -> String {
        let mut codes = Vec::new();
        if self.bold {
            codes.push(1);
        }
        if self.dim {
            codes.push(2);
        }
        if self.italic {
            codes.push(3);
        }
        if self.underline {
            codes.push(4);
        }
        if let Some(color) = self.fg {
            codes.push(color as u8);
        }
        if codes.is_empty() {
            return String::new();
        }
        let codes: Vec<String> = codes.iter().map(u8::to_string).collect();
        format!("\x1b[{}m", codes.join(";"))
    }

    /// `text` drawn in this style; each piece resets after itself so a style
    /// never leaks into the next line's indentation.
    pub fn paint(self, text: &str, color: bool) -> String {
        let start = self.start();
        if !color || start.is_empty() || text.is_empty() {
            return text.to_string();
        }
        format!("{start}{text}{RESET}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn painting_without_colour_leaves_text_alone() {
        assert_eq!(Style::fg(Color::Cyan).bold().paint("x", false), "x");
    }

    #[test]
    fn painting_with_colour_wraps_in_escapes() {
        assert_eq!(
            Style::fg(Color::Cyan).bold().paint("x", true),
            "\x1b[1;36mx\x1b[0m"
        );
        assert_eq!(Style::PLAIN.paint("x", true), "x");
    }
}
