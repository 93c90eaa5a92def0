//! Printing that never panics. `println!` and `eprintln!` panic when the stream is closed
//! or full (`… | head -1`, `>/dev/full`), which would lose the command's exit status and
//! skip restoring masks; these macros drop what cannot be written instead.

/// `print!` to stdout, ignoring write errors.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

/// `println!` to stdout, ignoring write errors.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `eprint!` to stderr, ignoring write errors.
macro_rules! err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}

/// `eprintln!` to stderr, ignoring write errors.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}
