//! The control socket itself: a Unix socket only root and the daemon's own user can use,
//! line-delimited JSON, one client at a time with a deadline each, and the client side for
//! `threadbalance ctl`.
//!
//! Who may talk to the daemon is decided three times, so that one mistake is not enough:
//!
//! ```text
//!   /run/threadbalance/          0700, owned by the daemon's user, not writable by others
//!   └── control.sock             0600 (set right after bind; the 0700 directory already
//!                                 hides it from everyone else in between)
//!   accept ──► SO_PEERCRED uid ──► check_peer: uid 0 or the daemon's own, or one error line
//! ```
//!
//! Binding is careful about what is already at the path: a socket some daemon still
//! answers on is left alone (`already in use`); a socket nobody answers on is a stale one
//! from a daemon that died, and is removed; anything that is not a socket (a file, a
//! directory, a symlink) is refused rather than deleted.
//!
//! Each client gets [`ControlServer::DEADLINE`] in total to send its requests and read its
//! answers (a slow or silent client cannot hold the socket), at most
//! [`ControlServer::MAX_REQUESTS`] requests per connection, and a line over
//! [`MAX_REQUEST_BYTES`] ends the connection after its error answer.

use super::{Control, MAX_REQUEST_BYTES, Request, Response, answer};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::fs;
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Why the control socket could not be set up, or a client was turned away. One line each.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The socket's directory is not a directory (or is a symlink).
    #[error("control socket directory {0}: not a directory")]
    DirNotDir(PathBuf),
    /// The directory belongs to another user.
    #[error("control socket directory {path}: owned by uid {owner}, not by the daemon's uid {own}")]
    DirOwner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The daemon's effective uid.
        own: u32,
    },
    /// Others may write in the directory, so they could replace the socket.
    #[error("control socket directory {path}: mode {mode:o} lets others write in it (want 0700)")]
    DirWritable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Something that is not a socket is at the path; it is not deleted.
    #[error("control socket {0}: something that is not a socket is there; not removing it")]
    NotSocket(PathBuf),
    /// Another daemon answers on the socket.
    #[error("control socket {0}: already in use by a running daemon")]
    InUse(PathBuf),
    /// The path has no directory part.
    #[error("control socket {0}: not a path in a directory")]
    NoDir(PathBuf),
    /// A system call failed.
    #[error("control socket {path}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// The peer's credentials could not be read.
    #[error("control socket: cannot read the client's credentials: {0}")]
    Credentials(nix::Error),
    /// A client that is neither root nor the daemon's user.
    #[error(
        "control socket: refused uid {uid}: only root and the daemon's uid {own} may control it"
    )]
    Refused {
        /// The client's uid.
        uid: u32,
        /// The daemon's effective uid.
        own: u32,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SocketError + '_ {
    move |source| SocketError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Whether a client of uid `peer` may control a daemon running as `own`: root, or the
/// daemon's own user.
///
/// ```
/// use threadbalance_daemon::control::socket::check_peer;
/// assert!(check_peer(0, 998).is_ok());      // root
/// assert!(check_peer(998, 998).is_ok());    // the daemon's own user
/// assert_eq!(check_peer(1000, 998).unwrap_err().to_string(),
///     "control socket: refused uid 1000: only root and the daemon's uid 998 may control it");
/// ```
pub fn check_peer(peer: u32, own: u32) -> Result<(), SocketError> {
    if peer == 0 || peer == own {
        Ok(())
    } else {
        Err(SocketError::Refused { uid: peer, own })
    }
}

/// The bound control socket.
#[derive(Debug)]
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    /// (dev, ino) of the socket we bound, so that drop removes only our own.
    inode: (u64, u64),
    own_uid: u32,
    deadline: Duration,
}

impl ControlServer {
    /// The time one client has for all its requests.
    pub const DEADLINE: Duration = Duration::from_secs(5);
    /// The most requests one connection may send.
    pub const MAX_REQUESTS: usize = 16;

    /// Binds the socket at `path` (see the module docs for what is checked), mode 0600.
    pub fn bind(path: &Path) -> Result<ControlServer, SocketError> {
        let own_uid = nix::unistd::geteuid().as_raw();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() && path.file_name().is_some() => d,
            _ => return Err(SocketError::NoDir(path.to_path_buf())),
        };
        prepare_dir(dir, own_uid)?;
        clear_stale(path)?;
        let listener = UnixListener::bind(path).map_err(io_err(path))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(io_err(path))?;
        let meta = fs::symlink_metadata(path).map_err(io_err(path))?;
        Ok(ControlServer {
            listener,
            path: path.to_path_buf(),
            inode: (meta.dev(), meta.ino()),
            own_uid,
            deadline: Self::DEADLINE,
        })
    }

    /// The same server with another per-client deadline (tests use a short one).
    pub fn with_deadline(mut self, deadline: Duration) -> ControlServer {
        self.deadline = deadline;
        self
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for one client and serves it until it closes, errs, or its deadline passes.
    /// A refused client gets one error line; the error is returned for the log.
    pub fn serve_one(&self, control: &dyn Control) -> Result<(), SocketError> {
        let (stream, _) = self.listener.accept().map_err(io_err(&self.path))?;
        self.serve_client(stream, control)
    }

    fn serve_client(&self, stream: UnixStream, control: &dyn Control) -> Result<(), SocketError> {
        let start = Instant::now();
        let cred = getsockopt(&stream, PeerCredentials).map_err(SocketError::Credentials)?;
        let uid = cred.uid();
        if let Err(refused) = check_peer(uid, self.own_uid) {
            let _ = stream.set_write_timeout(Some(self.deadline));
            let _ = writeln!(
                &stream,
                "{}",
                Response::error(refused.to_string()).to_line()
            );
            return Err(refused);
        }
        serve_lines(&stream, control, start + self.deadline).map_err(io_err(&self.path))
    }

    /// Serves clients on a thread of its own until [`ServerThread::stop`]. Errors of single
    /// clients (refused, timed out) are passed to `log` and do not stop the server.
    pub fn spawn(
        self,
        control: Arc<dyn Control>,
        log: impl Fn(&SocketError) + Send + 'static,
    ) -> Result<ServerThread, SocketError> {
        let stop = Arc::new(AtomicBool::new(false));
        let path = self.path.clone();
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                loop {
                    let stream = match self.listener.accept() {
                        Ok((s, _)) => s,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => {
                            log(&io_err(&self.path)(e));
                            if flag.load(Ordering::SeqCst) {
                                return;
                            }
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    };
                    if flag.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Err(e) = self.serve_client(stream, control.as_ref()) {
                        log(&e);
                    }
                }
            })
            .map_err(io_err(&path))?;
        Ok(ServerThread {
            stop,
            path,
            handle: Some(handle),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        // Remove the socket only if it is still the one we bound.
        if let Ok(meta) = fs::symlink_metadata(&self.path)
            && (meta.dev(), meta.ino()) == self.inode
        {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A control server running on its own thread.
#[derive(Debug)]
pub struct ServerThread {
    stop: Arc<AtomicBool>,
    path: PathBuf,
    handle: Option<JoinHandle<()>>,
}

impl ServerThread {
    /// Stops the server (after the client it serves, if any) and removes the socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept with a connection of our own; the server sees the flag and ends.
        let _ = UnixStream::connect(&self.path);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Creates the socket's directory 0700, or checks that an existing one is a directory of
/// ours that others cannot write in: the check every directory the daemon writes in gets
/// ([`threadbalance_linux::untrusted::create_private_dir`]; the state directory too).
fn prepare_dir(dir: &Path, own_uid: u32) -> Result<(), SocketError> {
    use threadbalance_linux::untrusted::{DirError, create_private_dir};
    create_private_dir(dir, own_uid).map_err(|e| match e {
        DirError::NotDir(path) => SocketError::DirNotDir(path),
        DirError::Owner { path, owner, own } => SocketError::DirOwner { path, owner, own },
        DirError::Writable { path, mode } => SocketError::DirWritable { path, mode },
        DirError::Io { path, source } => SocketError::Io { path, source },
    })
}

/// Removes a stale socket at `path`; refuses a live one or anything that is not a socket.
fn clear_stale(path: &Path) -> Result<(), SocketError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(path)(e)),
        Ok(meta) if !meta.file_type().is_socket() => Err(SocketError::NotSocket(path.into())),
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => Err(SocketError::InUse(path.into())),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                fs::remove_file(path).map_err(io_err(path))
            }
            Err(e) => Err(io_err(path)(e)),
        },
    }
}

/// Reads request lines and writes answer lines until EOF, the deadline, a line too long,
/// or [`ControlServer::MAX_REQUESTS`].
fn serve_lines(stream: &UnixStream, control: &dyn Control, deadline: Instant) -> io::Result<()> {
    let mut reader = BufReader::new(stream);
    for _ in 0..ControlServer::MAX_REQUESTS {
        let line = match read_line(&mut reader, stream, deadline)? {
            Line::Eof => return Ok(()),
            Line::TooLong => {
                set_deadline(stream, deadline)?;
                let refusal = super::RequestError::TooLong.to_string();
                writeln!(&*stream, "{}", Response::error(refusal).to_line())?;
                return Ok(());
            }
            Line::Text(l) => l,
        };
        let response = answer(control, &line);
        set_deadline(stream, deadline)?;
        writeln!(&*stream, "{}", response.to_line())?;
    }
    Ok(())
}

enum Line {
    Text(Vec<u8>),
    TooLong,
    Eof,
}

fn set_deadline(stream: &UnixStream, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            ErrorKind::TimedOut,
            "client deadline passed",
        ));
    }
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))
}

/// One line, without its `\n` (a last line without one counts), at most
/// [`MAX_REQUEST_BYTES`]; the deadline bounds the whole read.
fn read_line(
    reader: &mut BufReader<&UnixStream>,
    stream: &UnixStream,
    deadline: Instant,
) -> io::Result<Line> {
    let mut line = Vec::new();
    loop {
        set_deadline(stream, deadline)?;
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() {
                Line::Eof
            } else {
                Line::Text(line)
            });
        }
        let (chunk, newline) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        line.extend_from_slice(chunk);
        let used = chunk.len() + usize::from(newline);
        reader.consume(used);
        if line.len() > MAX_REQUEST_BYTES {
            return Ok(Line::TooLong);
        }
        if newline {
            return Ok(Line::Text(line));
        }
    }
}

/// Why `threadbalance ctl` got no answer. One line each.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be reached (daemon not running, or no permission).
    #[error("cannot reach the daemon at {path}: {source}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Sending or receiving failed (the daemon closed, or the deadline passed).
    #[error("talking to the daemon at {path}: {source}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The answer was not a response this client understands.
    #[error("the daemon's answer is not understood: {0}")]
    Answer(String),
}

/// Sends one request to the daemon at `path` and returns its answer, within `timeout`.
/// A daemon of another protocol version is an error.
pub fn request(path: &Path, req: &Request, timeout: Duration) -> Result<Response, ClientError> {
    let io = |source| ClientError::Io {
        path: path.to_path_buf(),
        source,
    };
    let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    // A daemon that refuses this client answers and closes before reading, so a failed
    // write is reported only if no answer can be read after it.
    let sent = writeln!(&stream, "{}", req.to_line())
        .and_then(|()| stream.shutdown(std::net::Shutdown::Write));
    let mut line = String::new();
    let read = BufReader::new(&stream)
        .take(64 * 1024 * 1024)
        .read_line(&mut line);
    if line.is_empty() {
        sent.map_err(io)?;
        read.map_err(io)?;
    }
    let response: Response = serde_json::from_str(line.trim_end())
        .map_err(|e| ClientError::Answer(super::one_line(&format!("{e}: {line}"))))?;
    if response.version != super::PROTOCOL_VERSION {
        return Err(ClientError::Answer(format!(
            "the daemon speaks version {}, this client {}",
            response.version,
            super::PROTOCOL_VERSION
        )));
    }
    Ok(response)
}
