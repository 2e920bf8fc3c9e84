//! `watch`'s screen on a terminal: the report redrawn in place on the alternate screen, which is
//! left when the screen is dropped (also on an error or a panic), restoring what was there.

use std::io::{self, IsTerminal};

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::output::{escape, write_stdout};

/// Switches to the alternate screen, hides the cursor and turns off line wrapping (long lines are
/// cut at the edge, so one line of text is one row).
const ENTER: &str = "\x1b[?1049h\x1b[?25l\x1b[?7l";
/// Undoes [`ENTER`].
const LEAVE: &str = "\x1b[?7h\x1b[?25h\x1b[?1049l";
/// Erases the rest of the line.
const ERASE_LINE: &str = "\x1b[K";

/// The terminal on stdout, showing one frame at a time.
pub struct Screen {
    /// Fires when the terminal is resized (SIGWINCH).
    resized: Signal,
    /// The frame on screen, drawn again after a resize.
    frame: String,
}

impl Screen {
    /// Takes over the terminal; `None` if stdout is not a terminal.
    ///
    /// # Errors
    ///
    /// Writing to the terminal, or registering for SIGWINCH, failed.
    pub fn enter() -> io::Result<Option<Screen>> {
        if !io::stdout().is_terminal() {
            return Ok(None);
        }
        let resized = signal(SignalKind::window_change())?;
        let screen = Screen { resized, frame: String::new() };
        write_stdout(ENTER)?;
        Ok(Some(screen))
    }

    /// Replaces what is on screen with `frame`'s lines, from the top. Lines beyond the bottom are
    /// replaced with a line saying how many there are.
    ///
    /// # Errors
    ///
    /// Writing to the terminal failed.
    pub fn draw(&mut self, frame: &str) -> io::Result<()> {
        frame.clone_into(&mut self.frame);
        self.redraw()
    }

    /// Draws the current frame again, fitted to the terminal's size now.
    ///
    /// # Errors
    ///
    /// Writing to the terminal failed.
    pub fn redraw(&self) -> io::Result<()> {
        let rows = rustix::termios::tcgetwinsize(io::stdout()).map_or(0, |size| usize::from(size.ws_row));
        write_stdout(&fit(&self.frame, rows))
    }

    /// Resolves when the terminal has been resized.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a resize that arrives meanwhile is reported by the next call.
    pub async fn resized(&mut self) {
        self.resized.recv().await;
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        // Nothing to do about a terminal that cannot be written to any more.
        let _ = write_stdout(LEAVE);
    }
}

/// The escape sequences that draw `frame` over the whole screen of `rows` rows (0: unknown). The
/// last line ends without a newline, which would scroll a full screen. The frame's lines are
/// [`escape`]d: the only escape sequences written are this module's.
fn fit(frame: &str, rows: usize) -> String {
    let mut lines: Vec<String> = frame.split_terminator('\n').map(|line| escape(line).into_owned()).collect();
    if rows > 0 && lines.len() > rows {
        let hidden = lines.len() - (rows - 1);
        lines.truncate(rows - 1);
        lines.push(format!("({hidden} more lines below the bottom of the terminal)"));
    }
    let mut out = String::from("\x1b[H");
    out.push_str(&lines.join(&format!("{ERASE_LINE}\r\n")));
    // Erase the rest of the last line and everything below it: what a longer frame left.
    out.push_str(ERASE_LINE);
    out.push_str("\x1b[J");
    out
}

#[cfg(test)]
mod tests {
    use super::fit;

    #[test]
    fn frames_are_drawn_from_the_top_and_erase_what_was_there() {
        assert_eq!(fit("a\nb\n", 0), "\x1b[Ha\x1b[K\r\nb\x1b[K\x1b[J");
        assert_eq!(fit("a\nb\n", 2), "\x1b[Ha\x1b[K\r\nb\x1b[K\x1b[J");
    }

    #[test]
    fn a_frame_cannot_write_escape_sequences_or_break_lines_of_its_own() {
        let drawn = fit("a\x1b[2J\x1b]0;pwned\x07\r\nb\u{202e}c\n", 0);
        assert_eq!(drawn, "\x1b[Ha\\x1b[2J\\x1b]0;pwned\\x07\\r\x1b[K\r\nb\\u{202e}c\x1b[K\x1b[J");
    }

    #[test]
    fn a_frame_taller_than_the_terminal_says_what_is_cut() {
        let drawn = fit("1\n2\n3\n4\n", 3);
        assert_eq!(drawn, "\x1b[H1\x1b[K\r\n2\x1b[K\r\n(2 more lines below the bottom of the terminal)\x1b[K\x1b[J");
    }
}
