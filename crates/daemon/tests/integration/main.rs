//! Integration tests of the daemon's building blocks on fixture files.
