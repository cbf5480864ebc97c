//! Where the command line's output goes: whether a stream is a terminal
//! that takes colour, and the colours `chat` uses.

use std::io::IsTerminal;

/// Colour on `stream`: only a terminal, and only while `NO_COLOR` is unset
/// or empty (<https://no-color.org>).
pub fn colour(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Text in a colour (an SGR code such as `2` for dim), or plain.
#[derive(Clone, Copy, Debug, Default)]
pub struct Paint {
    pub on: bool,
}

impl Paint {
    pub fn dim(self, text: &str) -> String {
        self.sgr("2", text)
    }

    pub fn red(self, text: &str) -> String {
        self.sgr("31", text)
    }

    pub fn green(self, text: &str) -> String {
        self.sgr("32", text)
    }

    fn sgr(self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paint_is_plain_when_off() {
        assert_eq!(Paint { on: false }.dim("x"), "x");
        assert_eq!(Paint { on: true }.red("x"), "\x1b[31mx\x1b[0m");
    }
}
